"""Fairness: intents keep writers from starving under readers, and readers under writers.

Waits are asserted by state, never by timing thresholds: which grant came first is
read from fencing tokens (the zxid of each grant, ZooKeeper's own order), and "a
request started after the intent was written" means it was made after this test
saw the intent in ZooKeeper.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections import defaultdict
from typing import Optional

import pytest
from click.testing import CliRunner
from conftest import PYTHON, wait_for
from kazoo.client import KazooClient
from zklock.cli.main import cli

from zklock import LockNotAcquired
from zklock.locks.locknode import PROTOCOL, LockData


class Looper:
    """A thread that takes ``spec`` over and over (each time with its own request),
    holding it ``hold`` seconds, and records (requested_at, token) per grant and
    (granted_at, released_at) per hold, as this process saw them: within the real hold.
    Started ``after`` another looper, it first waits until that one has held for a third of
    its hold: staggered holds that overlap, whatever the machine's speed."""

    def __init__(self, mgr, spec, hold: float, after: Optional[Looper] = None) -> None:
        self.mgr, self.spec, self.hold, self.after = mgr, spec, hold, after
        self.grants: list[tuple[float, int]] = []
        self.holds: list[tuple[float, float]] = []
        self.errors: list[Exception] = []
        self.holding_since: Optional[float] = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    @classmethod
    def staggered(cls, managers, spec, hold: float) -> list[Looper]:
        loopers: list[Looper] = []
        for mgr in managers:
            loopers.append(cls(mgr, spec, hold, after=loopers[-1] if loopers else None))
        return loopers

    def held_a_third(self) -> bool:
        since = self.holding_since
        return since is not None and time.monotonic() - since >= self.hold / 3

    def run(self) -> None:
        while self.after is not None and not self.after.held_a_third():
            if self.stop.wait(0.005):
                return
        while not self.stop.is_set():
            asked = time.monotonic()
            try:
                ls = self.mgr.acquire(self.spec, retries=100000, retry_interval=0.05)
            except Exception as exc:  # recorded, the test fails on it
                self.errors.append(exc)
                return
            self.grants.append((asked, ls.fencing_token))
            granted = self.holding_since = time.monotonic()
            self.stop.wait(self.hold)
            self.holding_since = None
            self.holds.append((granted, time.monotonic()))
            ls.release()


def intents_of(mgr, obj: str, mode: str) -> list:
    return [r for r in mgr.show(obj, extended=True, intents=True)
            if r.origin == "intent" and r.object == obj and r.mode.value == mode]


def test_a_writer_is_not_starved_by_overlapping_readers(make_manager):
    """Three readers hold S for 1 s each, a third of a second apart, so one always holds."""
    readers = Looper.staggered([make_manager() for _ in range(3)], [("db.t", "S")], 1.0)
    for r in readers:
        r.thread.start()
    writer_mgr, watcher = make_manager(), make_manager()
    assert wait_for(lambda: sum(len(r.grants) for r in readers) >= 3, timeout=10)
    outcome: list = []

    def write() -> None:
        try:
            ls = writer_mgr.acquire([("db.t", "X")], retries=150, retry_interval=0.1)
            outcome.append(ls)
            time.sleep(0.1)  # pacing: the writer's critical section
            ls.release()
        except LockNotAcquired as exc:
            outcome.append(exc)

    w = threading.Thread(target=write)
    w.start()
    assert wait_for(lambda: intents_of(watcher, "db.t", "X") or outcome, timeout=10)
    intent_seen = time.monotonic()  # the intent was written before this instant
    w.join(30)
    # every reader comes round once more: a grant it asked for after the intent was seen
    assert wait_for(lambda: all(any(asked > intent_seen for asked, _ in r.grants)
                                for r in readers), timeout=20), [r.errors for r in readers]
    for r in readers:
        r.stop.set()
    for r in readers:
        r.thread.join(10)
        assert not r.errors
    (granted,) = outcome
    assert not isinstance(granted, Exception), granted
    later = [tok for r in readers for asked, tok in r.grants if asked > intent_seen]
    assert later, "no reader asked after the intent: the scenario did not overlap"
    # every reader that asked after the writer's intent was written got in after the writer
    assert all(tok > granted.fencing_token for tok in later)
    assert intents_of(watcher, "db.t", "X") == []  # released with the set


def test_without_intents_the_writer_starves_as_in_hive(make_manager):
    """Overlapping readers keep a writer without intents out for good. A stalled machine
    can let every reader go at once, and a writer let in then was not starved: the run is
    repeated, but only when the readers' holds left a gap; in none, a writer let in fails."""
    for _ in range(3):
        readers = Looper.staggered([make_manager(intents=False) for _ in range(3)],
                                   [("db.t", "S")], 0.6)
        for r in readers:
            r.thread.start()
        try:
            assert wait_for(lambda rs=readers: sum(len(r.grants) for r in rs) >= 3, 10)
            writer = make_manager(intents=False)
            started = time.monotonic()
            try:
                writer.acquire([("db.t", "X")], retries=15, retry_interval=0.1).release()
            except LockNotAcquired as exc:
                assert "held in S" in str(exc)
                assert intents_of(writer, "db.t", "X") == []
                return
            let_in = time.monotonic()
        finally:
            for r in readers:
                r.stop.set()
            for r in readers:
                r.thread.join(10)
        holds = [h for r in readers for h in r.holds]
        assert not covered(holds, started, let_in), "X granted while a reader held S"
    pytest.fail("the writer got in through a gap between readers three times")


def covered(holds: list[tuple[float, float]], start: float, end: float) -> bool:
    """Whether the holds together span all of [start, end]."""
    reached = start
    for begin, finish in sorted(holds):
        if begin > reached:
            break
        reached = max(reached, finish)
    return reached >= end


def test_a_reader_is_not_starved_by_a_stream_of_writers(make_manager):
    writers = Looper.staggered([make_manager() for _ in range(3)], [("db.t/p=1", "X")], 0.4)
    for w in writers:
        w.thread.start()
    reader_mgr, watcher = make_manager(), make_manager()
    assert wait_for(lambda: sum(len(w.grants) for w in writers) >= 3, timeout=10)
    outcome: list = []

    def read() -> None:
        ls = reader_mgr.acquire([("db.t/p=1", "S")], retries=400, retry_interval=0.05)
        outcome.append(ls.fencing_token)
        time.sleep(0.1)  # pacing: the reader's critical section
        ls.release()

    r = threading.Thread(target=read)
    r.start()
    assert wait_for(lambda: intents_of(watcher, "db.t/p=1", "S") or outcome, timeout=10)
    intent_seen = time.monotonic()
    r.join(30)
    assert outcome
    n = [len(w.grants) for w in writers]
    assert wait_for(lambda: all(len(w.grants) > k for w, k in zip(writers, n)), timeout=20)
    for w in writers:
        w.stop.set()
    for w in writers:
        w.thread.join(10)
        assert not w.errors
    later = [tok for w in writers for asked, tok in w.grants if asked > intent_seen]
    assert later, "no writer asked after the reader's intent"
    assert all(tok > outcome[0] for tok in later)


def test_waiting_writers_go_in_the_order_they_were_first_denied(make_manager, zk_hosts, root):
    holder, watcher = make_manager(), make_manager()
    held = holder.acquire([("db.t", "S")])
    got: dict[str, object] = {}

    def ask(name: str, spec) -> threading.Thread:
        m = make_manager()
        t = threading.Thread(target=lambda: got.setdefault(
            name, m.acquire(spec, retries=1000, retry_interval=0.05)))
        t.start()
        return t

    t1 = ask("w1", [("db.t", "X")])
    assert wait_for(lambda: len(intents_of(watcher, "db.t", "X")) == 1, timeout=10)
    t2 = ask("w2", [("db", "S"), ("db.t", "X"), ("db.u", "X")])
    assert wait_for(lambda: len(intents_of(watcher, "db.t", "X")) == 2, timeout=10)
    t3 = ask("r3", [("db.t/p=1", "S")])  # a reader behind both writers
    assert wait_for(lambda: len(intents_of(watcher, "db.t/p=1", "S")) == 1, timeout=10)
    assert wait_for(lambda: len(watcher.waits.list()) == 3, timeout=10)
    queue = watcher.waits.list()  # in queue order: by ticket
    assert [w.wants[-1] for w in queue] == [["db.t", "X"], ["db.u", "X"], ["db.t/p=1", "S"]]
    assert queue[0].ticket < queue[1].ticket < queue[2].ticket
    base = ["--zk", zk_hosts, "--root", root]
    out = CliRunner().invoke(cli, [*base, "show", "db.t", "--extended"])
    # on db.t: w1's X, w2's X, r3's S; on db.t/p=1: r3's S
    assert out.exit_code == 0 and out.output.count(" intent ") == 4
    out = CliRunner().invoke(cli, [*base, "waits"])
    lines = [ln.split()[0] for ln in out.output.splitlines()[1:]]
    assert lines == ["#1", "#2", "#3"] and "queued behind X intent" in out.output
    held.release()
    for t, name in ((t1, "w1"), (t2, "w2"), (t3, "r3")):
        assert wait_for(lambda name=name: name in got, timeout=20)
        got[name].release()  # each lets the next in
        t.join(10)
    assert got["w1"].fencing_token < got["w2"].fencing_token < got["r3"].fencing_token


def test_intents_go_when_the_request_gives_up_or_its_process_dies(make_manager, zk_hosts, root):
    holder, watcher = make_manager(), make_manager()
    held = holder.acquire([("db.t", "S")])
    quitter = make_manager()
    with pytest.raises(LockNotAcquired):
        quitter.acquire([("db.t", "X")], retries=3, retry_interval=0.05)
    # withdrawn asynchronously (manager._withdraw_intents): gone within a round trip
    assert wait_for(lambda: intents_of(watcher, "db.t", "X") == [], timeout=5)
    code = ("import sys; from zklock import LockManager;"
            "m = LockManager(hosts=sys.argv[1], root=sys.argv[2], session_timeout=6);"
            "m.acquire([('db.t', 'X')], retries=100000, retry_interval=0.05)")
    proc = subprocess.Popen([PYTHON, "-c", code, zk_hosts, root])
    try:
        assert wait_for(lambda: intents_of(watcher, "db.t", "X"), timeout=20)
        with pytest.raises(LockNotAcquired, match="queued behind"):
            watcher.acquire([("db.t", "S")])  # a newer reader waits behind the writer
    finally:
        proc.kill()
        proc.wait(10)
    # its session ends with the process: the intent goes with it and readers get in
    assert wait_for(lambda: intents_of(watcher, "db.t", "X") == [], timeout=20)
    with watcher.acquire([("db.t", "S")]):
        pass
    held.release()


def test_intents_whose_multi_lost_its_reply_go_when_the_request_ends(make_manager):
    """ZooKeeper applied the multi that leaves a waiting writer's intents, and the reply was
    lost (what a connection dropping at that moment does: kazoo raises ConnectionLoss). The
    request fails, and the intents it never saw go with it: later writers are not queued
    behind a request that is gone, for as long as its session lives."""
    from kazoo.exceptions import ConnectionLoss

    from zklock import ZooKeeperUnavailable

    holder, watcher, writer = make_manager(), make_manager(), make_manager()
    held = holder.acquire([("db.t", "S")])
    applied = writer.ops.multi_chunked

    def reply_lost(ops):
        result = applied(ops)  # ZooKeeper has applied it
        if any(".intent-" in getattr(op, "path", "") for op in ops):
            raise ConnectionLoss()
        return result

    writer.ops.multi_chunked = reply_lost
    with pytest.raises(ZooKeeperUnavailable):
        writer.acquire([("db.t", "X")], retries=100, retry_interval=0.05)
    assert intents_of(watcher, "db.t", "X") == []  # swept by ticket before it raised
    held.release()
    with watcher.acquire([("db.t", "X")], retries=0):  # nothing queues it
        pass


@pytest.fixture
def raw(zk_hosts):
    client = KazooClient(hosts=zk_hosts)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


@pytest.mark.parametrize("data, disregarded", [
    (LockData(user="newer", protocol=PROTOCOL), True),                 # a first attempt
    (LockData(user="newer", protocol=PROTOCOL, ticket=2**62), True),  # a newer ticket
    (LockData(user="older", protocol=PROTOCOL, ticket=1), False),      # an older ticket
    (LockData(user="legacy"), False),                                  # knows no intents
    (None, False),                                                     # a recipe client
])
def test_a_writer_disregards_only_newer_nodes_that_defer_to_it(make_manager, raw, root,
                                                               data, disregarded):
    """A lock node created after the writer's intent by a request that honours intents
    and is newer is being undone by its writer; anything else still blocks."""
    holder, watcher, writer = make_manager(), make_manager(), make_manager()
    held = holder.acquire([("db.t", "S")])
    got: list = []
    t = threading.Thread(target=lambda: got.append(
        writer.acquire([("db.t", "X")], retries=100000, retry_interval=0.05)))
    t.start()
    assert wait_for(lambda: intents_of(watcher, "db.t", "X"), timeout=10)
    name = "read-" if data is None else "read-i" + "ab" * 12 + "-"
    node = raw.create(f"{root}/db/t/{name}", b"" if data is None else data.to_bytes(),
                      ephemeral=True, sequence=True)
    held.release()
    try:
        if disregarded:
            assert wait_for(lambda: got, timeout=10)
            assert raw.exists(node)  # granted beside a node whose writer is backing off
        else:
            # the intent is left in the denial's multi; the wait is published just after it
            assert wait_for(lambda: watcher.waits.list(), timeout=10)
            attempts = watcher.waits.list()[0].attempt
            assert wait_for(lambda: watcher.waits.list()[0].attempt >= attempts + 3,
                            timeout=10)
            assert not got
            raw.delete(node)
            assert wait_for(lambda: got, timeout=10)
    finally:
        if raw.exists(node):
            raw.delete(node)
        t.join(10)
        for ls in got:
            ls.release()


WORKER = r"""
import json, random, sys, time
from zklock import LockManager
hosts, root, seed, cycles = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rnd = random.Random(seed)
objects = ["hot", "hot.t", "hot.t/p=1", "hot.t/p=2", "hot.u", "hot.u/p=1"]
m = LockManager(hosts=hosts, root=root, session_timeout=4)
for _ in range(cycles):
    req = [(o, rnd.choice("SSX")) for o in rnd.sample(objects, rnd.randint(1, 4))]
    with m.acquire(req, retries=5000, retry_interval=0.01) as ls:
        start = time.monotonic_ns()
        time.sleep(rnd.random() * 0.01)  # pacing: the critical section's length
        ls.check()
        end = time.monotonic_ns()
        for t in ls.targets:
            print(json.dumps([t.obj.name, t.mode.value, ls.fencing_token, start, end, seed,
                              ls.attempts]), flush=True)
m.close()
"""


def test_mixed_multi_object_sets_from_processes_all_get_in_without_overlap(zk_hosts, root):
    """Several OS processes ask for overlapping all-or-none S/X sets (parents in S) over and
    over: every request is granted in the end (no deadlock, no livelock, none starves)
    and no two incompatible holders overlap."""
    n, cycles = 5, 30
    procs = [subprocess.Popen([PYTHON, "-c", WORKER, zk_hosts, root, str(i), str(cycles)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    sections = defaultdict(list)
    per_worker: dict[int, set] = defaultdict(set)
    waited = 0
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        for line in out.splitlines():
            obj, mode, token, start, end, who, attempts = json.loads(line)
            sections[obj].append((start, end, mode, who))
            per_worker[who].add(token)
            waited += attempts > 1
    assert all(len(per_worker[i]) == cycles for i in range(n))  # every request granted
    assert waited > 0  # there was contention, so intents were in play
    for secs in sections.values():
        secs.sort()
        for i, (_s1, e1, m1, w1) in enumerate(secs):
            for s2, _e2, m2, w2 in secs[i + 1:]:
                if s2 >= e1:
                    break
                assert not (w1 != w2 and "X" in (m1, m2)), (m1, m2)
