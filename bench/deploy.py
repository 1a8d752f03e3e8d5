"""Where Spark runs (issue 33): start-up from the wheel against a compile, and a Spark Thrift
server's INSERT, bare against locked. Side by side in one run.

Run: ``.venv/bin/python bench/deploy.py [--runs 3] [--statements 60] [--out FILE]`` (``--runs
0``: the Thrift server only). It starts its own ZooKeeper unless ZKLOCK_ZK is set.

1. **From import to the first locked statement**, in a fresh Python each time: import
   ``zklock.spark``, build a local SparkSession with ``configure()``, ``enforce()``, run one
   INSERT. Runs alternate between
   - **wheel**: zklock installed from its wheel (scripts/build_dist.py, for the installed
     Spark's line) in a fresh virtualenv: the jar is in the package;
   - **compile**: the source tree with an empty ``ZKLOCK_CACHE_DIR``: the jar is compiled
     first (what a source install did on every fresh machine before issue 33).
   Both start a Spark driver (most of the time); compare the difference.
2. **A Thrift server's statements**: Spark's own Thrift server bare, and ``zklock spark
   thrift-server`` (engine extension, child lock client), both from the installed PySpark.
   One PyHive connection to each (what dbt's ``thrift`` method opens); after a warm-up,
   each INSERT and each ``SELECT count(*)`` runs on both back to back, the order
   alternating, timed by the client. Medians per server, the median of the paired
   differences, and the calls the child lock client answered per statement, counted by
   the child itself (a wrapper named by spark.zklock.lockClient.python).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

# (common also puts the project on sys.path)
from common import csv_sink, engine_totals, median_ms, start_zookeeper
from zklock.cli.connect_server import pyspark_home

from zklock.servers.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = """
import sys, time
t0 = time.perf_counter()
from pyspark.sql import SparkSession
from zklock import LockManager
from zklock.spark import configure, enforce
spark = configure(SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                  .config("spark.sql.warehouse.dir", sys.argv[3])).getOrCreate()
client = enforce(spark, LockManager(hosts=sys.argv[1], root=sys.argv[2]))
spark.sql("CREATE TABLE t (id INT) USING parquet")
spark.sql("INSERT INTO t VALUES (1)")
print(time.perf_counter() - t0)
"""


def wheel_python(work: Path) -> Path:
    """A fresh virtualenv with zklock from its wheel (its dependencies from this one's)."""
    dist = work / "dist"
    import pyspark

    subprocess.run([sys.executable, str(ROOT / "scripts" / "build_dist.py"), "--spark",
                    pyspark.__version__, "--out", str(dist)], check=True,
                   stdout=subprocess.DEVNULL)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    str(next(dist.glob("zklock-*.whl")))], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True)
    Path(site.stdout.strip(), "bench-dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")
    return python


def first_statement(python: Path, hosts: str, root: str, work: Path,
                    env: dict[str, str]) -> float:
    run = Path(tempfile.mkdtemp(dir=work))
    out = subprocess.run([str(python), "-c", PIPELINE, hosts, root, str(run / "wh")],
                         capture_output=True, text=True, env=env, cwd=run, timeout=600)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    return float(out.stdout.strip().splitlines()[-1])


def start_up(hosts: str, runs: int, work: Path) -> dict[str, list[float]]:
    wheel = wheel_python(work)
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    times: dict[str, list[float]] = {"wheel": [], "compile": []}
    for i in range(runs):
        for side in (("wheel", "compile") if i % 2 == 0 else ("compile", "wheel")):
            if side == "wheel":
                env = dict(base, ZKLOCK_CACHE_DIR=str(work / f"unused-{i}"))
                times[side].append(first_statement(wheel, hosts, f"/bench-w{i}", work, env))
            else:
                env = dict(base, ZKLOCK_CACHE_DIR=str(work / f"cache-{i}"),
                           PYTHONPATH=str(ROOT))
                times[side].append(first_statement(Path(sys.executable), hosts,
                                                   f"/bench-c{i}", work, env))
    return times


#: The child lock client, counting and timing what the JVM asks it over its pipe: a wrapper
#: of ``python -m zklock.spark.lock_process`` named by spark.zklock.lockClient.python, which
#: writes {call: count, call + "_s": seconds answering} to the file it is given after every
#: call.
COUNTING_CHILD = """
import json, os, sys, time
from zklock.spark import lock_process

counts, where = {}, sys.argv[1]
answer = lock_process.LockProcess.answer


def counted(self, message):
    t0 = time.perf_counter()
    answer(self, message)
    call = message.get("call")
    counts[call] = counts.get(call, 0) + 1
    counts[call + "_s"] = counts.get(call + "_s", 0) + time.perf_counter() - t0
    with open(where + ".tmp", "w") as f:
        json.dump(counts, f)
    os.replace(where + ".tmp", where)


lock_process.LockProcess.answer = counted
sys.exit(lock_process.main())
"""


def counting_child(work: Path) -> tuple[Path, Path]:
    """The Python to give spark.zklock.lockClient.python, and the file it counts into."""
    script, counts = work / "counting_child.py", work / "child-calls.json"
    script.write_text(COUNTING_CHILD)
    wrapper = work / "counting-python"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {script} {counts}\n")
    wrapper.chmod(0o755)
    return wrapper, counts


class JdbcClient:
    """One PyHive connection to a Thrift server (what dbt's ``thrift`` method opens), timing
    each statement as the client sees it: execute, and for a query its rows fetched."""

    def __init__(self, url: str) -> None:
        from pyhive import hive

        host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
        self.conn = hive.connect(host=host, port=int(port), username="bench")
        self.cursor = self.conn.cursor()

    def run(self, statement: str) -> float:
        t0 = time.perf_counter()
        self.cursor.execute(statement)
        if statement.startswith("SELECT"):
            self.cursor.fetchall()
        return time.perf_counter() - t0

    def close(self) -> None:
        self.cursor.close()
        self.conn.close()


def bare_thrift(work: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    home = pyspark_home()
    proc = subprocess.Popen(
        [str(home / "bin" / "spark-submit"), "--class",
         "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2",
         "--conf", "spark.ui.enabled=false", "--conf",
         f"spark.sql.warehouse.dir={work / 'bare-wh'}", "spark-internal",
         "--hiveconf", f"hive.server2.thrift.port={port}",
         "--hiveconf", "hive.server2.thrift.bind.host=127.0.0.1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work, start_new_session=True)
    import socket

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"jdbc:hive2://127.0.0.1:{port}/default"
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the bare Thrift server did not listen")


def thrift(hosts: str, statements: int, work: Path) -> dict:
    """Each statement kind run ``statements`` times on both servers, back to back with the
    order alternating; per kind the times on each and the paired differences, and the calls
    the locked server's child lock client answered per statement."""
    (work / "bare").mkdir()
    bare, bare_url = bare_thrift(work / "bare")
    state = work / "zklock-state"
    python, counts = counting_child(work)
    metrics = work / "metrics"
    metrics.mkdir()
    zk = [sys.executable, "-m", "zklock.cli.main", "--zk", hosts, "--root", "/bench-thrift",
          "--state-dir", str(state)]
    started = subprocess.run([*zk, "spark", "thrift-server", "start", "--port",
                              str(free_port()), "--warehouse", str(work / "zk-wh"),
                              "--conf", f"spark.zklock.lockClient.python={python}",
                              *csv_sink(metrics)],
                             capture_output=True, text=True)
    if started.returncode != 0:
        bare.kill()
        raise SystemExit(started.stderr)
    clients = {}
    try:
        clients = {"bare": JdbcClient(bare_url), "zklock": JdbcClient(started.stdout.strip())}
        for client in clients.values():  # the first statements load the catalog, start the
            client.run("CREATE TABLE t (id INT) USING parquet")  # child, and warm both up
            for i in range(10):
                client.run(f"INSERT INTO t VALUES ({i})")
                client.run("SELECT count(*) FROM t")
        out: dict = {}
        kinds = {"INSERT": lambda i: f"INSERT INTO t VALUES ({i})",
                 "SELECT": lambda i: "SELECT count(*) FROM t"}
        for kind, text in kinds.items():
            before = json.loads(counts.read_text())
            times: dict[str, list[float]] = {"bare": [], "zklock": []}
            diffs = []
            for i in range(statements):
                order = ("bare", "zklock") if i % 2 == 0 else ("zklock", "bare")
                took = {name: clients[name].run(text(1000 + i)) for name in order}
                for name in order:
                    times[name].append(took[name])
                diffs.append(took["zklock"] - took["bare"])
            after = json.loads(counts.read_text())
            calls = {c: (after.get(c, 0) - before.get(c, 0)) / statements for c in after
                     if not c.endswith("_s")}
            answering = {c[:-2]: (after[c] - before.get(c, 0)) * 1000
                         / max(1, after[c[:-2]] - before.get(c[:-2], 0))
                         for c in after if c.endswith("_s")}
            out[kind] = {"times": times, "diffs": diffs, "calls": calls,
                         "child_ms": answering, "engine": engine_totals(metrics)}
        return out
    finally:
        for client in clients.values():
            client.close()
        subprocess.run([*zk, "spark", "thrift-server", "stop"], capture_output=True)
        bare.terminate()
        bare.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--statements", type=int, default=60,
                        help="statements of each kind on each Thrift server")
    parser.add_argument("--out")
    args = parser.parse_args()
    hosts, server = start_zookeeper()
    work = Path(tempfile.mkdtemp(prefix="zklock-bench-deploy-"))
    try:
        start = start_up(hosts, args.runs, work) if args.runs else {}
        jdbc = thrift(hosts, args.statements, work)
    finally:
        if server is not None:
            server.stop()
    lines = []
    if start:
        lines += [
            f"From import to the first locked statement (fresh Python, local Spark; {args.runs}"
            " runs each, alternating):", "",
            "| jar | median s | runs s |", "|---|---|---|"]
        for side, xs in start.items():
            lines.append(f"| {side} | {median_ms(xs) / 1000:.1f} | "
                         + ", ".join(f"{x:.1f}" for x in xs) + " |")
        saved = median_ms(start["compile"]) - median_ms(start["wheel"])
        lines += ["", f"The wheel's jar saves {saved / 1000:.1f} s of the first statement.", ""]
    lines += [f"A Spark Thrift server's statements over JDBC (PyHive, {args.statements} of each"
              " kind on each server, back to back, the order alternating; the client's own"
              " timings):", "",
              "| statement | bare median ms (p90) | locked median ms (p90) |"
              " paired difference ms | child lock client calls per statement |"
              " the child answering, ms per call | the engine's grant (lockWait), median ms |",
              "|---|---:|---:|---:|---|---|---:|"]

    def p90(xs: list[float]) -> float:
        return sorted(xs)[int(0.9 * (len(xs) - 1))] * 1000

    for kind, got in jdbc.items():
        bare, locked = got["times"]["bare"], got["times"]["zklock"]
        calls = ", ".join(f"{c} {n:.2f}" for c, n in sorted(got["calls"].items()) if n)
        child = ", ".join(f"{c} {ms:.2f}" for c, ms in sorted(got["child_ms"].items()))
        lines.append(f"| {kind} | {median_ms(bare):.1f} ({p90(bare):.1f}) |"
                     f" {median_ms(locked):.1f} ({p90(locked):.1f}) |"
                     f" {median_ms(got['diffs']):+.1f} | {calls} | {child} |"
                     f" {got['engine'].get('lockWaitMedianMs', 0):.2f} |")
    text = "\n".join(lines)
    print(text)
    print(json.dumps({"start": start, "jdbc": jdbc}))
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
