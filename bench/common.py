"""What every benchmark needs: a ZooKeeper (ZKLOCK_ZK's when set, else one of its own),
timing helpers, a local SparkSession, and where the table goes."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

#: Where zklock imports from: this checkout, or another's laid out as installed
#: (bench/scheduler.py --before runs processes of both in one run).
sys.path.insert(0, os.environ.get("ZKLOCK_BENCH_IMPORTS")
                or str(Path(__file__).resolve().parents[1]))

from zklock.servers.ports import free_port  # noqa: E402
from zklock.servers.zookeeper import ZkServer  # noqa: E402


def start_zookeeper(**server_args: Any) -> tuple[str, Optional[ZkServer]]:
    """(connect string, the server to stop afterwards or None when ZKLOCK_ZK was given)."""
    hosts = os.environ.get("ZKLOCK_ZK")
    if hosts:
        return hosts, None
    server = ZkServer(Path(tempfile.mkdtemp(prefix="zklock-bench-")), port=free_port(),
                      **server_args)
    return server.start(), server


def write_round_trip(hosts: str, reps: int = 200) -> float:
    """One ZooKeeper write's round trip on ``hosts``, in ms: the median of ``reps`` sets of
    one node's data, each a write the leader logs (fsync on) and answers."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=hosts)
    zk.start()
    try:
        zk.ensure_path("/bench-rtt")
        writes = []
        for i in range(reps):
            t0 = time.perf_counter()
            zk.set("/bench-rtt", str(i).encode())
            writes.append(time.perf_counter() - t0)
    finally:
        zk.stop()
    return median_ms(writes)


def median_ms(xs: list[float]) -> float:
    """The median of durations in seconds, in milliseconds."""
    return statistics.median(xs) * 1000


def timed(fn: Callable[[], Any], reps: int) -> list[float]:
    """``reps`` durations of ``fn()`` in seconds."""
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def paired(contenders: dict[str, Callable[[int], Any]], i: int) -> dict[str, float]:
    """One run of each contender (seconds), back to back, the order alternating with ``i``
    so that neither always runs first: noise then hits both sides of a paired difference."""
    order = list(contenders.items())
    out = {}
    for name, fn in order if i % 2 else order[::-1]:
        t0 = time.perf_counter()
        fn(i)
        out[name] = time.perf_counter() - t0
    return out


def local_spark(prefix: str) -> Any:
    """A local SparkSession (2 cores, no UI) configured for zklock, on a new warehouse."""
    from pyspark.sql import SparkSession

    from zklock.spark import configure

    warehouse = tempfile.mkdtemp(prefix=prefix)
    spark = configure(SparkSession.builder.master("local[2]")
                      .config("spark.sql.warehouse.dir", warehouse)
                      .config("spark.ui.enabled", "false")
                      .config("spark.ui.showConsoleProgress", "false")
                      .config("spark.sql.shuffle.partitions", "2")).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def csv_sink_conf(directory: Path) -> dict[str, str]:
    """Spark's CSV metrics sink, every second, into ``directory``, as Spark conf: how a bench
    reads the engine's own figures (zklock's source: LockMetricsSource.java) from a server's
    JVM."""
    prefix = "spark.metrics.conf.*.sink.csv."
    return {prefix + k: v for k, v in (("class", "org.apache.spark.metrics.sink.CsvSink"),
                                       ("period", "1"), ("unit", "seconds"),
                                       ("directory", str(directory)))}


def csv_sink(directory: Path) -> list[str]:
    """:func:`csv_sink_conf` as spark-submit's arguments."""
    return [arg for k, v in csv_sink_conf(directory).items() for arg in ("--conf", f"{k}={v}")]


def engine_totals(directory: Path,
                  wanted: tuple[str, ...] = ("lockWait", "fileListing")) -> dict[str, float]:
    """The last row of each ``wanted`` zklock timer's CSV (count, median ms) the sink wrote:
    the engine's view of the grant (lockWait: the call to the lock client and its answer),
    of the fresh listings, of a command's end (statementEnd). Read after the sink's next
    period, so that it covers what ran."""
    seen = {f: f.stat().st_mtime for f in directory.glob("*zklock.*.csv")}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(
            f.stat().st_mtime > m for f, m in seen.items()):
        time.sleep(0.2)  # the sink writes once a second
    out: dict[str, float] = {}
    for f in directory.glob("*zklock.*.csv"):
        name = f.stem.rsplit(".", 1)[-1]
        if name in wanted:
            header, *rows = f.read_text().splitlines()
            row = dict(zip(header.split(","), rows[-1].split(","))) if rows else {}
            out[name] = float(row.get("count", 0))
            out[name + "MedianMs"] = float(row.get("p50", 0))  # the sink writes ms
    return out


def report(text: str, out: Optional[str]) -> None:
    """Print a benchmark's Markdown, and append it to ``out`` when given."""
    print(text)
    if out:
        with open(out, "a") as fh:
            fh.write(text + "\n")
