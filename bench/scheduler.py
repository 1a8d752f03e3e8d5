"""Scheduler: trigger-to-start latency and the leader's CPU, against a 60-second poller.

Run: ``make bench-scheduler`` (or ``.venv/bin/python bench/scheduler.py``). It starts
its own ZooKeeper (fsync on) unless ZKLOCK_ZK is set, and in one run:

1. latency: 100 schedules ``EVERY 1 SECOND``; one leader process (``--executors 0``,
   it runs nothing itself) and one executor process (pool 64). Latency of a
   trigger is the execution's start (EXECUTING, in ZooKeeper) minus the trigger
   time; an execution that merged several triggers counts once per trigger.
2. the same with the leader replaced by a poller that claims due work every
   60 s, as Hive's executors poll the metastore
   (hive.scheduled.queries.executor.idle.sleep.time = 60 s);
3. leader CPU: 1000 schedules ``EVERY 1 MINUTE`` spread over the minute (about
   17 triggers a second), the leader's user+system CPU from /proc over 60 s.

The processes run statements with a no-op runner: this measures the
scheduler's coordination (claims, watches, takes, progress), not Spark.

``--before TREE`` (a checkout of zklock at another commit) adds a before-and-after in
the same run: latency runs alternating the leader and executor processes of TREE and of
this checkout, with each side's CPU over the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]

from common import report, start_zookeeper  # noqa: E402
from zklock.scheduler.admin import ScheduledQueries  # noqa: E402
from zklock.scheduler.ddl import parse_scheduled_ddl  # noqa: E402
from zklock.scheduler.leader import Leader  # noqa: E402
from zklock.scheduler.schedule import Schedule  # noqa: E402
from zklock.scheduler.store import SchedulerStore  # noqa: E402

from zklock.config import Settings  # noqa: E402
from zklock.manager import connect  # noqa: E402
from zklock.testing import terminate  # noqa: E402

POLL_S = 60.0


class NoopRunner:
    """Runs nothing: the benchmark measures coordination, not Spark."""

    def run(self, execution: Any, group: str) -> None:
        time.sleep(0.005)

    def cancel(self, group: str) -> None:
        pass

    def validate(self, statement: str) -> None:
        pass


class PollingLeader(Leader):
    """Hive's behaviour: look for due work every POLL_S seconds, whatever changed."""

    def _sleep(self) -> None:
        with self._cond:
            self._cond.wait(POLL_S)
            self._dirty = set(self._cache)  # re-read everything at each poll, as a poll would
            self._children_changed = True


def run_process(role: str, hosts: str, namespace: str, pool: int) -> None:
    """A scheduler process of the benchmark (leader, poller or executor)."""
    import zklock.scheduler.service as service_mod
    from zklock.scheduler.service import SchedulerService

    if role == "poller":
        service_mod.Leader = PollingLeader  # type: ignore[misc]
    settings = Settings.resolve(dict(hosts=hosts, scheduler_root="/bench-sched",
                                     scheduler_namespace=namespace, scheduler_quiet_period=0,
                                     scheduler_max_parallel=0, scheduler_progress_interval=5,
                                     scheduler_progress_timeout=60))
    service = SchedulerService(settings, NoopRunner(), pool_size=pool).start()
    print("ready", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait()
    service.stop(wait=False)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def importable(tree: Path) -> Path:
    """A directory from which ``tree``'s zklock imports as installed: zklock/ with its
    scheduler/ and cli/ inside (setup.cfg's package_dir), copied to a temporary place."""
    out = Path(tempfile.mkdtemp(prefix="zklock-before-"))
    shutil.copytree(tree / "zklock", out / "zklock")
    for part in ("scheduler", "cli"):
        shutil.copytree(tree / part, out / "zklock" / part)
    return out


def spawn(role: str, hosts: str, namespace: str, pool: int,
          imports: Optional[Path] = None) -> subprocess.Popen:
    env = dict(os.environ, ZKLOCK_BENCH_IMPORTS=str(imports or ROOT))
    proc = subprocess.Popen([sys.executable, __file__, "--role", role, "--hosts", hosts,
                             "--namespace", namespace, "--pool", str(pool)],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def admin(hosts: str, namespace: str) -> ScheduledQueries:
    settings = Settings.resolve(dict(hosts=hosts, scheduler_root="/bench-sched",
                                     scheduler_namespace=namespace, user="bench",
                                     scheduler_admins="bench"))
    return ScheduledQueries(SchedulerStore(connect(settings), settings), settings)


def latencies(adm: ScheduledQueries, since_ms: int, until_ms: int) -> list[float]:
    out = []
    for e in adm.executions():
        if e.start is None or e.trigger_time < since_ms or e.trigger_time > until_ms:
            continue
        sched = Schedule.from_dict(adm.get(e.query_name).schedule) if e.merged > 1 else None
        triggers = sched.fires_between(e.trigger_time, e.last_trigger) if sched else \
            [e.trigger_time]
        out += [(e.start - t) / 1000 for t in triggers]
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def latency_run(hosts: str, leader_role: str, seconds: float,
                imports: Optional[Path] = None) -> dict:
    """Latencies of 100 schedules every second; with the leader's and the executor's CPU
    (ms per second) over the measured part."""
    namespace = f"lat-{leader_role}-{int(time.time())}"
    adm = admin(hosts, namespace)
    lead = spawn(leader_role, hosts, namespace, 0, imports)
    time.sleep(1)
    work = spawn("executor", hosts, namespace, 64, imports)
    try:
        for i in range(100):
            adm.apply(parse_scheduled_ddl(f"CREATE SCHEDULED QUERY s{i} EVERY 1 SECOND"
                                          " AS SELECT 1"))
        start = int(time.time() * 1000) + 2000
        time.sleep(2)
        c0, e0, t0 = cpu_seconds(lead.pid), cpu_seconds(work.pid), time.monotonic()
        time.sleep(seconds - 2)
        c1, e1, t1 = cpu_seconds(lead.pid), cpu_seconds(work.pid), time.monotonic()
        end = int(time.time() * 1000) - 3000
        lat = latencies(adm, start, end)
    finally:
        terminate(lead, work)
    return {"triggers": len(lat), "p50_s": pct(lat, 0.5), "p99_s": pct(lat, 0.99),
            "max_s": max(lat), "leader_cpu_ms_per_s": 1000 * (c1 - c0) / (t1 - t0),
            "executor_cpu_ms_per_s": 1000 * (e1 - e0) / (t1 - t0)}


def before_and_after(hosts: str, before: Path, seconds: float, rounds: int) -> str:
    """Latency runs alternating ``before``'s processes and this checkout's, in one run."""
    imports = importable(before)
    rows = []
    try:
        for r in range(rounds):
            for side, where in (("before", imports), ("here", None)):
                got = latency_run(hosts, "leader", seconds, where)
                print(side, r + 1, json.dumps(got), flush=True)
                rows.append(f"| {side}, round {r + 1} | {got['p50_s']:.3f} s |"
                            f" {got['p99_s']:.3f} s | {got['max_s']:.3f} s |"
                            f" {got['leader_cpu_ms_per_s']:.0f} |"
                            f" {got['executor_cpu_ms_per_s']:.0f} |")
    finally:
        shutil.rmtree(imports, ignore_errors=True)
    return "\n".join([
        f"Before ({before}) and here, alternating, {seconds:g} s each, 100 schedules every"
        " second:", "",
        "| processes | p50 | p99 | max | leader CPU ms/s | executor CPU ms/s |",
        "|---|---:|---:|---:|---:|---:|", *rows])


def cpu_run(hosts: str, seconds: float) -> dict:
    namespace = f"cpu-{int(time.time())}"
    adm = admin(hosts, namespace)
    lead = spawn("leader", hosts, namespace, 0)
    time.sleep(1)
    work = spawn("executor", hosts, namespace, 64)
    try:
        for i in range(1000):
            adm.apply(parse_scheduled_ddl(f"CREATE SCHEDULED QUERY s{i} EVERY 1 MINUTE"
                                          f" OFFSET BY '{i % 60}s' AS SELECT 1"))
        time.sleep(65)  # one full minute: every schedule claimed once before measuring
        c0, e0, t0 = cpu_seconds(lead.pid), cpu_seconds(work.pid), time.monotonic()
        runs0 = len(adm.executions())
        time.sleep(seconds)
        c1, e1, t1 = cpu_seconds(lead.pid), cpu_seconds(work.pid), time.monotonic()
        runs = len(adm.executions()) - runs0
    finally:
        terminate(lead, work)
    return {"leader_cpu_pct": 100 * (c1 - c0) / (t1 - t0),
            "executor_cpu_pct": 100 * (e1 - e0) / (t1 - t0),
            "executions_per_s": runs / (t1 - t0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--role")
    ap.add_argument("--hosts")
    ap.add_argument("--namespace")
    ap.add_argument("--pool", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=40,
                    help="length of each latency run (at least 10)")
    ap.add_argument("--out", help="append the Markdown table to this file")
    ap.add_argument("--before", type=Path,
                    help="a checkout at another commit: alternate its processes with this"
                         " checkout's in latency runs (and skip the other parts)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of --before")
    args = ap.parse_args()
    if args.seconds < 10:
        ap.error("--seconds must be at least 10 (2 s to start, 3 s at the end)")
    if args.role:
        run_process(args.role, args.hosts, args.namespace, args.pool)
        return
    hosts, server = start_zookeeper()
    if args.before is not None:
        try:
            report(before_and_after(hosts, args.before, args.seconds, args.rounds), args.out)
        finally:
            if server is not None:
                server.stop()
        return
    try:
        ours = latency_run(hosts, "leader", args.seconds)
        print("zklock", json.dumps(ours), flush=True)
        poll = latency_run(hosts, "poller", max(args.seconds, 2.2 * POLL_S))
        print("poller", json.dumps(poll), flush=True)
        cpu = cpu_run(hosts, 60)
        print("cpu", json.dumps(cpu), flush=True)
    finally:
        if server is not None:
            server.stop()
    table = "\n".join([
        "| scheduler | triggers measured | p50 trigger-to-start | p99 | max |",
        "|---|---:|---:|---:|---:|",
        f"| zklock (watches, timers) | {ours['triggers']} | {ours['p50_s']:.3f} s |"
        f" {ours['p99_s']:.3f} s | {ours['max_s']:.3f} s |",
        f"| 60 s poller (Hive's default) | {poll['triggers']} | {poll['p50_s']:.1f} s |"
        f" {poll['p99_s']:.1f} s | {poll['max_s']:.1f} s |",
        "",
        f"Leader CPU with 1000 enabled schedules ({cpu['executions_per_s']:.1f} executions/s):"
        f" {cpu['leader_cpu_pct']:.2f}% of one core (the executor process:"
        f" {cpu['executor_cpu_pct']:.1f}%).",
    ])
    report(table, args.out)


if __name__ == "__main__":
    main()
