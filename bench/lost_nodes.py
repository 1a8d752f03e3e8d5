"""How soon a holder learns that another client deleted its lock node.

Run: ``.venv/bin/python bench/lost_nodes.py`` (``--reps``, ``--out``). It starts its own
ZooKeeper (fsync on) unless ZKLOCK_ZK is set, then, ``--reps`` times: a LockManager takes X
on a table and a partition, a second plain kazoo client (an operator's zkCli, Hive's
clean-up) deletes one of the set's nodes, and the time from the delete's reply to the
holder's ``on_lost`` callback is recorded. Also for an admin's force-drop of the same set.
Prints the median, p99 and maximum (ms) as a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import report, start_zookeeper  # noqa: E402

from zklock import LockManager  # noqa: E402


def told_after(lockset, delete) -> float:
    """Seconds from the end of ``delete()`` to the set's on_lost callback."""
    told = threading.Event()
    at: list[float] = []
    lockset.on_lost(lambda s: (at.append(time.perf_counter()), told.set()))
    delete()
    done = time.perf_counter()
    if not told.wait(10):
        raise RuntimeError("the holder was never told")
    return max(0.0, at[0] - done)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--out", help="append the Markdown table to this file")
    args = ap.parse_args()
    hosts, server = start_zookeeper()
    try:
        holder = LockManager(hosts=hosts, root="/bench-lost", retries=0)
        admin = LockManager(hosts=hosts, root="/bench-lost", retries=0)
        operator = KazooClient(hosts=hosts)
        operator.start(timeout=30)
        samples: dict[str, list[float]] = {"node deleted by another client": [],
                                           "admin force-drop": []}
        for i in range(args.reps):
            held = holder.acquire([("bench.t/ds=1", "X")], query_id=f"q{i}")
            node = held.node_paths[-1]
            samples["node deleted by another client"].append(
                told_after(held, lambda node=node: operator.delete(node)))
            held.release()
            held = holder.acquire([("bench.t/ds=1", "X")], query_id=f"f{i}")
            samples["admin force-drop"].append(told_after(
                held, lambda: admin.force_drop_lease(["bench.t"], include_implicit=True)))
            held.release()
        rows = ["| fault on a held lock | median ms | p99 ms | max ms |", "|---|---:|---:|---:|"]
        for name, xs in samples.items():
            xs = sorted(x * 1000 for x in xs)
            p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
            rows.append(f"| {name} | {statistics.median(xs):.2f} | {p99:.2f} | {xs[-1]:.2f} |")
        report("\n".join(rows), args.out)
        operator.stop()
        holder.close()
        admin.close()
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
