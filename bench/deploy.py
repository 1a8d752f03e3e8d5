"""Where Spark runs (issue 33): start-up from the wheel against a compile, and a Spark Thrift
server's INSERT, bare against locked. Side by side in one run.

Run: ``.venv/bin/python bench/deploy.py [--runs 3] [--inserts 40] [--out FILE]``. It starts
its own ZooKeeper unless ZKLOCK_ZK is set.

1. **From import to the first locked statement**, in a fresh Python each time: import
   ``zklock.spark``, build a local SparkSession with ``configure()``, ``enforce()``, run one
   INSERT. Runs alternate between
   - **wheel**: zklock installed from its wheel (scripts/build_dist.py, for the installed
     Spark's line) in a fresh virtualenv: the jar is in the package;
   - **compile**: the source tree with an empty ``ZKLOCK_CACHE_DIR``: the jar is compiled
     first (what a source install did on every fresh machine before issue 33).
   Both start a Spark driver (most of the time); compare the difference.
2. **A Thrift server's INSERT**: Spark's own Thrift server bare, and ``zklock spark
   thrift-server`` (engine extension, child lock client), both from the installed PySpark;
   after a warm-up, beeline runs the same INSERTs (``beeline -f``) in four rounds that
   alternate which server goes first, and each statement's time is the one beeline
   reports. Medians per server, and their difference.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from common import median_ms, start_zookeeper  # also puts the project on sys.path
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


TIMING = re.compile(r"\((\d+(?:\.\d+)?) seconds\)")


def beeline_times(url: str, statements: list[str], work: Path) -> list[float]:
    script = work / f"statements-{free_port()}.sql"
    script.write_text("".join(f"{s};\n" for s in statements))
    out = subprocess.run([str(pyspark_home() / "bin" / "beeline"), "-u", url, "-n", "bench",
                          "-f", str(script)], capture_output=True, text=True, timeout=900)
    found = [float(t) for t in TIMING.findall(out.stdout + out.stderr)]
    if out.returncode != 0 or len(found) < len(statements):
        raise SystemExit((out.stdout + out.stderr)[-3000:])
    return found[-len(statements):]


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


def thrift(hosts: str, inserts: int, work: Path) -> dict[str, list[float]]:
    (work / "bare").mkdir()
    bare, bare_url = bare_thrift(work / "bare")
    state = work / "zklock-state"
    zk = [sys.executable, "-m", "zklock.cli.main", "--zk", hosts, "--root", "/bench-thrift",
          "--state-dir", str(state)]
    started = subprocess.run([*zk, "spark", "thrift-server", "start", "--port",
                              str(free_port()), "--warehouse", str(work / "zk-wh")],
                             capture_output=True, text=True)
    if started.returncode != 0:
        bare.kill()
        raise SystemExit(started.stderr)
    url = started.stdout.strip()
    try:
        servers = {"bare": bare_url, "zklock": url}
        times: dict[str, list[float]] = {"bare": [], "zklock": []}
        for where in servers.values():  # the first statements load the catalog and
            beeline_times(where, ["CREATE TABLE t (id INT) USING parquet",  # start the child
                                  "INSERT INTO t VALUES (0)"], work)
        rounds = 4  # alternating which server goes first, so that noise hits both
        for r in range(rounds):
            batch = [f"INSERT INTO t VALUES ({r * 1000 + i})" for i in range(inserts // rounds)]
            for name in (("bare", "zklock") if r % 2 == 0 else ("zklock", "bare")):
                times[name] += beeline_times(servers[name], batch, work)
        return times
    finally:
        subprocess.run([*zk, "spark", "thrift-server", "stop"], capture_output=True)
        bare.terminate()
        bare.wait(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--inserts", type=int, default=40)
    parser.add_argument("--out")
    args = parser.parse_args()
    hosts, server = start_zookeeper()
    work = Path(tempfile.mkdtemp(prefix="zklock-bench-deploy-"))
    try:
        start = start_up(hosts, args.runs, work)
        inserts = thrift(hosts, args.inserts, work)
    finally:
        if server is not None:
            server.stop()
    lines = [
        f"From import to the first locked statement (fresh Python, local Spark; {args.runs}"
        " runs each, alternating):", "",
        "| jar | median s | runs s |", "|---|---|---|"]
    for side, xs in start.items():
        lines.append(f"| {side} | {median_ms(xs) / 1000:.1f} | "
                     + ", ".join(f"{x:.1f}" for x in xs) + " |")
    saved = median_ms(start["compile"]) - median_ms(start["wheel"])
    lines += ["", f"The wheel's jar saves {saved / 1000:.1f} s of the first statement.", "",
              f"A Spark Thrift server's INSERT (beeline, {len(inserts['bare'])} statements"
              " each in alternating rounds, beeline's own timings):", "",
              "| server | median ms | p90 ms |", "|---|---|---|"]
    for side, xs in inserts.items():
        ordered = sorted(xs)
        lines.append(f"| {side} | {median_ms(xs):.0f} |"
                     f" {ordered[int(0.9 * (len(ordered) - 1))] * 1000:.0f} |")
    locked, bare = median_ms(inserts["zklock"]), median_ms(inserts["bare"])
    lines += ["", f"Locked against bare: x{locked / bare:.2f} (+{locked - bare:.0f} ms a"
              " statement)."]
    text = "\n".join(lines)
    print(text)
    print(json.dumps({"start": start, "inserts": inserts}))
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
