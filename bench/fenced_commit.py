"""What the fenced commit costs a write: zklock's committers checking the locks at job commit.

Run: ``.venv/bin/python bench/fenced_commit.py`` (``--reps``, ``--out``). It starts its
own ZooKeeper (fsync on; the check writes nothing) unless ZKLOCK_ZK is set and one local
SparkSession built with ``zklock.spark.configure``, then measures:

- the check alone (CommitFence.check: a sync and one exists per lock node, pipelined on
  the JVM's cached ZooKeeper client), for sets of 2 to 128 nodes, called through py4j and
  less a py4j call of the same shape, next to one kazoo ``exists`` round trip;
- a small write through a LockingSession, ``INSERT INTO t PARTITION (ds, hr) VALUES``
  (4 lock nodes), with the fence on and off (its local properties left unset), run
  interleaved; the median of the paired differences.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (  # noqa: E402
    local_spark,
    median_ms,
    paired,
    report,
    start_zookeeper,
    timed,
)


def check_alone(spark, client, hosts: str, reps: int) -> list[tuple[int, float, float]]:
    """(nodes, median ms of the check, median ms of the py4j call alone) per set size."""
    from py4j.java_collections import ListConverter

    gateway = spark.sparkContext._gateway
    jvm = spark._jvm
    fence = jvm.zklock.commit.CommitFence
    rows = []
    for n in (2, 4, 16, 128):
        base = f"/bench-fence/n{n}"
        client.ensure_path(base)
        nodes = [client.create(f"{base}/read-i{'0' * 24}-", ephemeral=True, sequence=True)
                 for _ in range(n)]
        jlist = ListConverter().convert(nodes, gateway._gateway_client)
        for _ in range(100):  # the client's connection, JIT
            fence.check(hosts, jlist)
        check = timed(lambda jl=jlist: fence.check(hosts, jl), reps)
        call = timed(lambda jl=jlist: jvm.java.util.Objects.equals(hosts, jl), reps)
        rows.append((n, median_ms(check), median_ms(call)))
        for node in nodes:
            client.delete(node)
    return rows


def write_with_and_without(spark, locking, reps: int) -> dict[str, float]:
    """Median ms of a small write with the fence, without it, and of the paired difference."""
    from zklock.spark.locked_statement import LockedStatement

    fenced = LockedStatement._fence
    insert = "INSERT INTO bench.t PARTITION (ds='d1', hr=1) VALUES ({i}, 1.0)"
    times: dict[str, list[float]] = {"fenced": [], "unfenced": [], "diff": []}

    def contender(fence: Any) -> Callable[[int], None]:
        def write(i: int) -> None:
            LockedStatement._fence = fence
            locking.sql(insert.format(i=i))
        return write

    contenders = {"fenced": contender(fenced),
                  "unfenced": contender(lambda self: (None, None))}
    try:
        for i in range(5):
            for write in contenders.values():
                write(i)
        for i in range(reps):
            pair = paired(contenders, i)
            for kind, t in pair.items():
                times[kind].append(t)
            times["diff"].append(pair["fenced"] - pair["unfenced"])
    finally:
        LockedStatement._fence = fenced
    return {k: median_ms(v) for k, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40, help="writes per contender")
    ap.add_argument("--out", help="append the Markdown table to this file")
    args = ap.parse_args()

    hosts, server = start_zookeeper(container_check_ms=60000)
    from zklock.spark import LockingSession

    spark = local_spark("zklock-bench-wh-")
    try:
        spark.sql("CREATE DATABASE bench")
        spark.sql("CREATE TABLE bench.t (id INT, amt DOUBLE, ds STRING, hr INT) USING parquet"
                  " PARTITIONED BY (ds, hr)")
        locking = LockingSession(spark, hosts=hosts, root="/bench-fence-locks", retries=0)
        client = locking.manager.client
        exists = median_ms(timed(lambda: client.exists("/"), 200))
        alone = check_alone(spark, client, hosts, reps=200)
        write = write_with_and_without(spark, locking, args.reps)
        locking.close()
    finally:
        spark.stop()
        if server is not None:
            server.stop()
    table = [
        f"One kazoo exists round trip in this run: {exists:.2f} ms (median of 200).",
        "",
        "| lock nodes | check ms (through py4j) | py4j call alone ms | check ms |",
        "|---:|---:|---:|---:|",
        *(f"| {n} | {c:.2f} | {p:.2f} | {c - p:.2f} |" for n, c, p in alone),
        "",
        f"A small write (`INSERT INTO t PARTITION (ds, hr) VALUES`, 4 lock nodes), {args.reps}"
        f" pairs: fenced {write['fenced']:.1f} ms, unfenced {write['unfenced']:.1f} ms,"
        f" paired difference {write['diff']:+.2f} ms (median).",
    ]
    report("\n".join(table), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
