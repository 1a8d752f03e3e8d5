"""Proof under fire: 8 client processes, random lock sets, random faults, a checker.

A 3-node ensemble on loopback; every client reaches it through its own fault
proxies. Faults, one at a time so a quorum stays: the leader or a follower is
killed (SIGKILL, restarted 2 s later) or paused (SIGSTOP for 1.5 s); a client's
connections are dropped; a client is cut off for longer than its session
timeout (its session expires); a client's packets are delayed; a client is
SIGKILLed (and replaced). Passes
only if no two incompatible critical sections on one object overlapped
(unless the earlier holder had been told of its loss and the fenced resource
refused its later writes), every loss was reported within the session timeout,
no lock node is left once the clients are gone, and no request gave up in a
fault-free window.

ZKLOCK_CHAOS_SECONDS sets the length (30 s here; `make soak` runs 20 minutes).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from conftest import lock_nodes, wait_for
from kazoo.client import KazooClient
from polling import sessions_expired

from zklock.testing.chaos import check, read_lines
from zklock.testing.proxy import FaultProxy

SECONDS = float(os.environ.get("ZKLOCK_CHAOS_SECONDS", "30"))
CLIENTS = 8
SESSION_TIMEOUT = 4.0


def test_chaos(ensemble, tmp_path):
    ens = ensemble
    rng = random.Random(int(os.environ.get("ZKLOCK_CHAOS_SEED", "7")))
    root = f"/chaos-{uuid.uuid4().hex[:8]}"
    proxies = {k: [FaultProxy(("127.0.0.1", m.port)) for m in ens.members]
               for k in range(CLIENTS)}
    procs: dict[int, subprocess.Popen] = {}
    outs: list[str] = []
    seeds = iter(range(1000, 100000))
    started = time.time()

    def spawn(k: int) -> None:
        out = str(tmp_path / f"client{k}-{len(outs)}.jsonl")
        outs.append(out)
        left = max(5.0, SECONDS - (time.time() - started))
        hosts = ",".join(p.connect for p in proxies[k])
        procs[k] = subprocess.Popen([sys.executable, "-m", "zklock.testing.chaos", hosts, root,
                                     out, str(left), str(next(seeds))],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    for k in range(CLIENTS):
        spawn(k)
    faults: list[dict] = []
    kinds = ["kill-leader", "kill-follower", "pause-leader", "pause-follower", "drop-client",
             "blackhole-client", "sigkill-client", "delay-client", "delete-node"]
    operator = KazooClient(hosts=ens.connect)  # deletes lock nodes, as zkCli or Hive would
    operator.start(timeout=30)
    def working(out: str) -> bool:  # the client wrote a critical section: it holds locks
        return any(x.get("kind") == "section" for x in read_lines([out]))

    try:
        # faults are for clients at work: every client has connected and held a lock
        assert wait_for(lambda: all(working(out) for out in outs), timeout=60), outs
        while time.time() - started < SECONDS - 8:
            kind = rng.choice(kinds)
            k = rng.randrange(CLIENTS)
            leader = ens.leader()  # up to three `srvr` calls: not part of the fault's time
            fault = {"kind": kind, "at": time.time()}
            others = [i for i in range(3) if i != leader]
            if kind.endswith(("-leader", "-follower")):
                i = (leader if kind.endswith("-leader") and leader is not None
                     else rng.choice(others))
                fault["member"] = i
            if kind in ("kill-leader", "kill-follower"):
                ens.kill(i)
                time.sleep(2)  # pacing: the fault itself, a member down for 2 s
                ens.restart(i)
            elif kind in ("pause-leader", "pause-follower"):
                ens.pause(i)
                time.sleep(1.5)  # pacing: the fault itself, a member stalled for 1.5 s
                ens.resume(i)
                ens.wait_serving(60)
            elif kind == "drop-client":
                fault["client"] = k
                for p in proxies[k]:
                    p.drop_all()
            elif kind == "blackhole-client":
                fault["client"] = k
                for p in proxies[k]:
                    p.blackhole = True
                # the fault itself: cut off until its session expires on the server (the
                # client sees nothing to wait for; the leader's session tracker does)
                cut = set().union(*(set(p.sessions) for p in proxies[k]))
                assert wait_for(lambda cut=cut: sessions_expired(ens, cut),
                                timeout=15 * SESSION_TIMEOUT), cut
                for p in proxies[k]:
                    p.blackhole = False
                    p.drop_all()
            elif kind == "delay-client":
                fault["client"] = k
                for p in proxies[k]:
                    p.delay = 0.3   # a slow network: work goes on, slower
                time.sleep(2)  # pacing: the fault itself, a slow network for 2 s
                for p in proxies[k]:
                    p.delay = 0.0
            elif kind == "delete-node":
                held = [n for n in lock_nodes(operator, root) if "/read-" in n or "/write-" in n]
                if not held:
                    continue
                node = rng.choice(held)
                try:
                    raw, _ = operator.get(node)
                    fault["holder"] = json.loads(raw.decode()).get("job", "")
                    fault["at"] = time.time()
                    operator.delete(node)
                except Exception:  # released meanwhile: no fault
                    continue
                fault["node"] = node
            elif kind == "sigkill-client":
                fault["client"] = k
                procs[k].send_signal(signal.SIGKILL)
                procs[k].wait()
                spawn(k)
            faults.append(fault)
            time.sleep(rng.uniform(1.0, 3.0))  # pacing: the harness's cadence of faults
        for p in procs.values():
            p.wait(timeout=SECONDS + 120)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        for ps in proxies.values():
            for p in ps:
                p.close()
        operator.stop()
        operator.close()
    # the clients tag their lines with a client name; map proxy index to names for checks
    lines = read_lines(outs)
    names = {}
    for k in range(CLIENTS):
        for out in outs:
            if Path(out).name.startswith(f"client{k}-"):
                names.setdefault(k, set()).update(
                    x["client"] for x in read_lines([out]) if "client" in x)
    client_faults = []
    for f in faults:
        if "holder" in f:
            client_faults.append({**f, "client": f["holder"]})
        elif "client" in f:
            for name in names.get(f["client"], ()):
                client_faults.append({**f, "client": name})
        else:
            client_faults.append(f)
    report = check(lines, client_faults, session_timeout=SESSION_TIMEOUT)
    # no lock node and no wait node is left once every session is gone: the clients have
    # exited, so each session ends within SESSION_TIMEOUT of its last ping; wait for that
    # (up to 60 s, room for a loaded server's expiry), not a guessed pause
    from kazoo.exceptions import NoNodeError

    zk = KazooClient(hosts=ens.connect)
    zk.start(timeout=30)

    def leftovers() -> tuple[list[str], list[str]]:
        try:
            waits = zk.get_children(f"{root}/.waits")
        except NoNodeError:
            waits = []
        return lock_nodes(zk, root), waits
    try:
        wait_for(lambda: leftovers() == ([], []), timeout=60)
        orphans, waits = leftovers()
    finally:
        zk.stop()
        zk.close()
    by_kind: dict[str, int] = {}
    for f in faults:
        by_kind[f["kind"]] = by_kind.get(f["kind"], 0) + 1
    summary = {"seconds": SECONDS, "clients": CLIENTS, "lock_cycles": report.sections,
               "faults": by_kind, "incompatible_overlaps": len(report.overlaps),
               "overlaps_excused_by_fencing": report.excused,
               "unreported_losses": len(report.unreported), "orphans": len(orphans) + len(waits),
               "longest_detect_s": round(report.longest_detect_s, 3),
               "longest_delete_detect_s": round(report.longest_delete_detect_s, 3),
               "gave_up_fault_free": len(report.gave_up), "client_errors": report.errors}
    print("CHAOS", json.dumps(summary))
    for o in report.overlaps[:5]:  # in full: CI shows captured output of a failure
        print("OVERLAP", json.dumps(o))
    if os.environ.get("ZKLOCK_CHAOS_DUMP"):
        Path(os.environ["ZKLOCK_CHAOS_DUMP"]).write_text(
            json.dumps({"lines": lines, "faults": client_faults}))
    if os.environ.get("ZKLOCK_CHAOS_REPORT"):
        Path(os.environ["ZKLOCK_CHAOS_REPORT"]).write_text(json.dumps(summary, indent=2))
    # the workload went on through the faults (about 3 critical sections a second here;
    # the bar is the old 100 for long runs, less for the short one of make test)
    assert report.sections > min(100, 1.5 * SECONDS), summary
    assert not report.overlaps, report.overlaps[:3]
    assert not report.unreported, report.unreported[:3]
    assert not orphans and not waits, (orphans[:5], waits[:5])
    assert not report.gave_up, report.gave_up[:3]


def test_losses_are_reported_within_the_session_timeout(ensemble, root):
    """A held lock whose connection goes silent (blackhole), is dropped, or whose server is
    paused or killed: the holder is told within the session timeout, every time."""
    from zklock import LockManager
    from zklock.errors import ZooKeeperUnavailable

    ens = ensemble
    detect = {}
    for fault in ("blackhole", "drop", "pause-server", "kill-server"):
        proxies = [FaultProxy(("127.0.0.1", m.port)) for m in ens.members]
        # the connect may follow a member's pause or restart, and on a loaded machine a new
        # session through three proxies can take longer than the default 5 s: what this
        # test bounds is the loss's detection, not the connect (CI once failed here)
        try:
            mgr = LockManager(hosts=",".join(p.connect for p in proxies), root=root,
                              session_timeout=SESSION_TIMEOUT, retries=50, retry_interval=0.1,
                              connect_timeout=120)
        except ZooKeeperUnavailable as e:  # say what the ensemble was then, in one line
            raise AssertionError(f"before {fault}: {e}; members now: {ens.modes()}") from None
        try:
            held = mgr.acquire([(f"chaos.{fault.replace('-', '_')}", "X")])
            told: list[float] = []
            lost = threading.Event()

            def tell(_s, box=told, event=lost) -> None:
                box.append(time.monotonic())
                event.set()
            held.on_lost(tell)
            on = mgr.client._connection._socket.getpeername()[1]
            member = next(i for i, p in enumerate(proxies) if p.address[1] == on)
            t0 = time.monotonic()
            if fault == "blackhole":
                proxies[member].blackhole = True
            elif fault == "drop":
                proxies[member].drop_all()
            elif fault == "pause-server":
                ens.pause(member)
            else:
                ens.kill(member)
            assert lost.wait(SESSION_TIMEOUT + 2), fault
            detect[fault] = round(told[0] - t0, 3)
            assert detect[fault] <= SESSION_TIMEOUT, detect
        finally:
            if fault == "pause-server":
                ens.resume(member)
            if fault == "kill-server":
                ens.restart(member)
            ens.wait_serving(60)
            for p in proxies:
                p.close()
            mgr.close()
    print("DETECT", json.dumps(detect))
