"""Several processes, many cycles, a few hot objects: no two incompatible holders overlap."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict

from conftest import PYTHON

WORKER = r"""
import json, random, sys, time
from zklock import LockManager, LockNotAcquired
hosts, root, seed, cycles = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rnd = random.Random(seed)
objects = ["hot.t", "hot.t/p=1", "hot.t/p=2", "hot.u", "hot"]
m = LockManager(hosts=hosts, root=root, retries=5000, retry_interval=0.01, session_timeout=4)
for _ in range(cycles):
    req = [(o, rnd.choice("SX")) for o in rnd.sample(objects, rnd.randint(1, 3))]
    with m.acquire(req) as ls:
        start = time.monotonic_ns()
        time.sleep(rnd.random() * 0.005)  # pacing: the critical section's length
        ls.check()
        end = time.monotonic_ns()
        for t in ls.targets:
            print(json.dumps([t.obj.name, t.mode.value, ls.fencing_token, start, end, seed]))
m.close()
"""


def test_no_incompatible_overlap_across_processes(zk_hosts, root):
    procs = [subprocess.Popen([PYTHON, "-c", WORKER, zk_hosts, root, str(i), "40"],
                              stdout=subprocess.PIPE, text=True) for i in range(4)]
    sections = defaultdict(list)
    total = 0
    for p in procs:
        out, _ = p.communicate(timeout=240)
        assert p.returncode == 0
        for line in out.splitlines():
            obj, mode, token, start, end, who = json.loads(line)
            sections[obj].append((start, end, mode, token, who))
            total += 1
    assert total >= 4 * 40
    overlaps = 0
    for secs in sections.values():
        secs.sort()
        for i, (_s1, e1, m1, _t1, w1) in enumerate(secs):
            for s2, _e2, m2, _t2, w2 in secs[i + 1:]:
                if s2 >= e1:
                    break
                if w1 != w2 and "X" in (m1, m2):
                    overlaps += 1
        # fencing tokens of exclusive sections increase with time
        xs = [t for s, e, m, t, w in secs if m == "X"]
        assert xs == sorted(xs)
    assert overlaps == 0


PIPELINE = r"""
import sys, time
from zklock import LockManager
hosts, root, hold = sys.argv[1], sys.argv[2], float(sys.argv[3])
m = LockManager(hosts=hosts, root=root, session_timeout=4)  # every wait setting its default
t0 = time.monotonic()
with m.acquire([("sales.orders/ds=2024-01-01", "X")], query_id=f"p{hold}") as ls:
    print(f"granted {time.monotonic() - t0:.1f} after {ls.attempts} attempt(s)"
          f" at {time.time():.3f}", flush=True)
    time.sleep(hold)  # the subject: the first pipeline holds its lock this long
print(f"released at {time.time():.3f}", flush=True)
m.close()
"""


def test_a_second_pipeline_waits_with_default_settings_and_succeeds(zk_hosts, root):
    """Two pipelines overwriting one partition, each with zklock's default settings: the
    second waits as long as the first holds (here 16 s, beyond the 10 retries a second apart
    that zklock's default used to be), backing off, and then gets its locks."""
    first = subprocess.Popen([PYTHON, "-c", PIPELINE, zk_hosts, root, "16"],
                             stdout=subprocess.PIPE, text=True)
    assert first.stdout.readline().startswith("granted")
    second = subprocess.Popen([PYTHON, "-c", PIPELINE, zk_hosts, root, "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err[-2000:]
    attempts, granted_at = int(out.split()[3]), float(out.split()[6])
    rest, _ = first.communicate(timeout=60)
    assert first.returncode == 0
    released_at = float(rest.split()[-1])
    # it waited until the first released (16 s: beyond ten retries a second apart, however
    # late this machine started it), denied at least once, backing off: 1, 2, 4, then 5 s
    assert granted_at >= released_at - 0.05 and 2 <= attempts <= 8, (out, rest)


def test_a_timeout_waits_to_its_end_and_wins_over_a_configured_count(make_manager):
    """An explicit timeout waits by time even where a retry count is configured (a
    LockingSession after SET zklock.lock.timeout), and gives up at its end, not a pause
    before it."""
    import time

    import pytest

    from zklock import LockNotAcquired

    holder = make_manager()
    waiter = make_manager(retries=0, retry_interval=1.0)
    with holder.acquire([("db.t", "X")]):
        started = time.monotonic()
        with pytest.raises(LockNotAcquired):
            waiter.acquire([("db.t", "S")], timeout=2.5)
        waited = time.monotonic() - started
    # no sooner than the timeout; later by at most a backoff pause (MAX_BACKOFF_S) and room
    # for a loaded machine
    assert 2.3 <= waited < 2.5 + 5.0 + 2.5, waited
