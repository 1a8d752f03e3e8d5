"""make demo: concurrent PySpark jobs on a small partitioned warehouse, through LockingSession.

Uses ZKLOCK_ZK when set; otherwise starts the embedded ZooKeeper in .zklock/
(and stops it again at the end if it started it). The warehouse lives in
.zklock/demo-warehouse and is rebuilt on every run:

1. ``setup`` builds sales.orders (partitioned by ds) with two days;
2. ``backfill`` overwrites ds=2024-01-01 slowly (X on that partition);
3. ``ingest`` adds ds=2024-01-03 at the same time (X on another partition: no conflict);
4. ``report`` reads ds=2024-01-01 and waits for the backfill to finish;
5. an operator takes a lease on ds=2024-01-02 and ``compact`` (a rewrite of that day)
   waits until the lease is dropped;
6. all along, a ``zklock scheduler run`` process runs the two scheduled queries the setup
   job created in SQL: ``compact_orders`` (an INSERT OVERWRITE every 10 s) and
   ``rebuild_summary`` (a summary rebuild every 15 s), through the same locks. At the end
   both are disabled, the scheduler stops, and ``sysdb.scheduled_executions`` is printed.

`zklock show` snapshots taken while they run show who holds what.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from zklock import LockManager  # noqa: E402
from zklock.server import ZkServer  # noqa: E402

ZKLOCK = [str(Path(sys.executable).parent / "zklock")]


def show(hosts: str, *args: str) -> None:
    print(f"$ zklock show {' '.join(args)}".rstrip(), flush=True)
    subprocess.run(ZKLOCK + ["--zk", hosts, "--root", "/demo", "show", *args], check=False)


def lease_cli(hosts: str, *args: str) -> None:
    print(f"$ zklock lease {' '.join(args)}", flush=True)
    subprocess.run(ZKLOCK + ["--zk", hosts, "--root", "/demo", "lease", *args], check=False)


def start_job(role: str, hosts: str, warehouse: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(HERE / "demo_job.py"), role, hosts,
                             str(warehouse)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    proc.ready = threading.Event()  # type: ignore[attr-defined]

    def pump() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            print(line, end="", flush=True)
            if "ready" in line:
                proc.ready.set()  # type: ignore[attr-defined]
    threading.Thread(target=pump, daemon=True).start()
    return proc


def wait_ready(proc: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not proc.ready.wait(0.2):  # type: ignore[attr-defined]
        if proc.poll() is not None:
            raise SystemExit(f"a demo job exited early (code {proc.returncode})")
        if time.monotonic() > deadline:
            raise SystemExit(f"a demo job did not start within {timeout:.0f} s")


def go(proc: subprocess.Popen) -> None:
    wait_ready(proc)
    proc.stdin.write("go\n")  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]


def start_scheduler(hosts: str, warehouse: Path) -> subprocess.Popen:
    """`zklock scheduler run` on the demo's catalog (its tables come from --init-sql)."""
    sys.path.insert(0, str(HERE))
    from demo_job import tables

    init = warehouse / "scheduler-init.sql"
    init.write_text(";\n".join(tables(str(warehouse))) + ";\n")
    env = {**os.environ, "ZKLOCK_ZK": hosts, "ZKLOCK_ROOT": "/demo",
           "ZKLOCK_SCHEDULER_NAMESPACE": "demo", "ZKLOCK_USER": "scheduler"}
    print("$ zklock scheduler run --namespace demo --executors 2 --quiet-period 0"
          " --init-sql scheduler-init.sql", flush=True)
    log = open(warehouse / "scheduler.log", "w")  # noqa: SIM115 (the process writes to it)
    return subprocess.Popen(
        ZKLOCK + ["scheduler", "run", "--executors", "2", "--quiet-period", "0",
                  "--init-sql", str(init), "--conf", "spark.master=local[1]",
                  "--conf", f"spark.sql.warehouse.dir={warehouse}/_catalog_scheduler"],
        env=env, stdout=log, stderr=subprocess.STDOUT, text=True)


def scheduler_cli(hosts: str, *args: str, quiet: bool = False) -> None:
    if not quiet:
        print(f"$ zklock {' '.join(args)}", flush=True)
    subprocess.run(ZKLOCK + ["--zk", hosts, "--root", "/demo", *args], check=False,
                   env={**os.environ, "ZKLOCK_SCHEDULER_NAMESPACE": "demo",
                        "ZKLOCK_USER": "setup"})


def stop_scheduler(hosts: str, proc: subprocess.Popen, warehouse: Path) -> None:
    """Disable both queries, let running executions end, stop the process, print the table."""
    from zklock.scheduler.store import SchedulerStore

    from zklock.config import Settings
    from zklock.manager import connect

    for name in ("compact_orders", "rebuild_summary"):
        scheduler_cli(hosts, "schedule", "alter", name, "--disable")
    settings = Settings.resolve({"hosts": hosts, "scheduler_namespace": "demo"})
    client = connect(settings)
    store = SchedulerStore(client, settings)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(q.active_execution
                                               for q in store.list_queries()):
        time.sleep(0.2)
    client.stop()
    client.close()
    scheduler_cli(hosts, "scheduler", "status")
    proc.terminate()
    proc.wait(60)
    print("$ zklock sql \"SELECT ... FROM sysdb.scheduled_executions\"", flush=True)
    subprocess.run(ZKLOCK + [
        "--zk", hosts, "--root", "/demo", "sql",
        "SELECT scheduled_execution_id, schedule_name, state, executor_query_id, trigger_time,"
        " start_time, elapsed FROM sysdb.scheduled_executions"
        " WHERE namespace = 'demo' ORDER BY trigger_time",
        "--init-sql", str(warehouse / "scheduler-init.sql"),
        "--conf", "spark.master=local[1]",
        "--conf", f"spark.sql.warehouse.dir={warehouse}/_catalog_cli"], check=False)


def wait_for_x(mgr: LockManager, obj: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(r.object == obj and r.mode.value == "X" for r in mgr.show()):
            return
        time.sleep(0.05)
    raise SystemExit(f"no X lock on {obj} within {timeout:.0f}s")


def main() -> int:
    hosts = os.environ.get("ZKLOCK_ZK")
    server = None
    if not hosts:
        server = ZkServer(Path(".zklock"), port=int(os.environ.get("ZKLOCK_DEMO_PORT", "2181")))
        started = server.pid() is None
        hosts = server.start()
        print(f"embedded ZooKeeper at {hosts}")
        if not started:
            server = None  # someone else's: leave it running
    warehouse = Path(".zklock/demo-warehouse").resolve()
    shutil.rmtree(warehouse, ignore_errors=True)
    warehouse.mkdir(parents=True)
    jobs: list[subprocess.Popen] = []
    try:
        watcher = LockManager(hosts=hosts, root="/demo")
        # a fresh start: no scheduled queries or executions left from an earlier demo
        watcher.client.delete("/zklock/scheduler/demo", recursive=True)
        print("starting the setup job (a local Spark session takes about 10 s) ...", flush=True)
        setup = start_job("setup", hosts, warehouse)
        go(setup)
        if setup.wait(300) != 0:
            raise SystemExit("the setup job failed")
        scheduler = start_scheduler(hosts, warehouse)
        jobs.append(scheduler)
        print("starting backfill, ingest and report, three PySpark jobs ...", flush=True)
        jobs += [start_job(role, hosts, warehouse)
                 for role in ("backfill", "ingest", "report", "compact")]
        backfill, ingest, report, compact = jobs[1:]
        for job in (backfill, ingest, report, compact):
            wait_ready(job)
        go(backfill)
        wait_for_x(watcher, "sales.orders/ds=2024-01-01")
        go(ingest)
        wait_for_x(watcher, "sales.orders/ds=2024-01-03")
        go(report)
        time.sleep(1.0)
        show(hosts)
        show(hosts, "sales.orders", "--extended")
        scheduler_cli(hosts, "schedule", "list")
        codes = [job.wait(300) for job in (backfill, ingest, report)]
        show(hosts)
        print("an operator takes a maintenance lease on ds=2024-01-02; the compaction waits",
              flush=True)
        lease_id = watcher.grab_lease([("sales.orders/ds=2024-01-02", "X")], duration_s=600,
                                      holder="ops-maintenance")
        print(f"$ zklock lease grab sales.orders/ds=2024-01-02:X --duration 10m  ->  {lease_id}")
        go(compact)
        time.sleep(3.0)
        lease_cli(hosts, "list")
        lease_cli(hosts, "drop", str(lease_id))
        codes.append(compact.wait(300))
        show(hosts)
        scheduler_cli(hosts, "scheduler", "status")
        stop_scheduler(hosts, scheduler, warehouse)
        watcher.close()
        if any(codes):
            print(f"a demo job failed: exit codes {codes}")
            return 1
        print("done: the report never saw a half-written partition, the two writers never"
              " waited for each other")
    finally:
        for job in jobs:
            if job.poll() is None:
                job.kill()
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
