"""Acquire+release of N-object lock sets: zklock vs Hive's algorithm vs kazoo vs the floor.

Run: ``make bench-locks`` (or ``.venv/bin/python bench/locks.py``). It starts
its own ZooKeeper (fsync on, as in production) unless ZKLOCK_ZK is set, runs
every contender against the same server in one process, and prints a
Markdown table (``--out`` appends it to a file).

Contenders, each on N partitions of one table plus the database and table:
- zklock: LockManager.acquire + release;
- hive: Hive's ZooKeeperHiveLockManager algorithm written with kazoo: per
  object in order, create the object node, create the sequential ephemeral
  node, getChildren; release with delete, getChildren, delete of the empty
  object node;
- kazoo: kazoo's ReadLock/WriteLock recipe, one object at a time;
- floor: one multi of creates, pipelined getChildren, one multi of deletes
  (object nodes made beforehand);
- floor+multiRead: the same with the reads batched in ZooKeeper's multiRead.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError, NotEmptyError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import report, start_zookeeper  # noqa: E402

from zklock import LockManager  # noqa: E402
from zklock.locknode import LockData  # noqa: E402
from zklock.lockrequest import normalize  # noqa: E402
from zklock.zk import EPHEMERAL, SEQUENTIAL, ZkOps  # noqa: E402

DATA = LockData(user="bench", host="bench-host", pid=1, session="0x1", query_id="q-bench",
                query="INSERT INTO bench.t PARTITION (p) SELECT ...",
                acquired_at="2026-01-01T00:00:00.000Z").to_bytes()


def request(n: int) -> list[tuple[str, str]]:
    return [(f"bench.t/p={i}", "X") for i in range(n)]


def hive_cycle(client: KazooClient, root: str, n: int) -> None:
    targets = normalize(request(n))
    held = []
    for t in targets:
        obj = t.obj.znode(root)
        try:
            client.create(obj)
        except NodeExistsError:
            pass
        prefix = "read-" if t.mode.value == "S" else "write-"
        node = client.create(f"{obj}/{prefix}", DATA, ephemeral=True, sequence=True)
        client.get_children(obj)
        held.append((obj, node))
    for obj, node in reversed(held):
        client.delete(node)
        if not client.get_children(obj):
            try:
                client.delete(obj)
            except (NotEmptyError, NoNodeError):
                pass


def kazoo_cycle(client: KazooClient, root: str, n: int) -> None:
    targets = normalize(request(n))
    locks = []
    for t in targets:
        path = t.obj.znode(root) + "/kz"
        lock = client.ReadLock(path) if t.mode.value == "S" else client.WriteLock(path)
        if not lock.acquire(blocking=False):
            raise RuntimeError("kazoo lock denied in an uncontended run")
        locks.append(lock)
    for lock in reversed(locks):
        lock.release()


def floor_setup(client: KazooClient, root: str, n: int) -> list[str]:
    paths = [t.obj.znode(root) for t in normalize(request(n))]
    for p in paths:
        client.ensure_path(p)
    return paths


def floor_cycle(ops: ZkOps, paths: list[str], multi_read: bool) -> None:
    """One multi of creates, getChildren of every node, one multi of deletes.

    ``multi_read=False`` is the issue's floor (kazoo's pipelined async getChildren);
    True batches the reads in ZooKeeper's multiRead as zklock does.
    """
    results, _ = ops.multi_chunked(
        [ops.create_op(f"{p}/write-", DATA, EPHEMERAL | SEQUENTIAL) for p in paths])
    if multi_read:
        ops.children_many(paths)
    else:
        for a in [ops.client.get_children_async(p) for p in paths]:
            a.get()
    ops.multi_chunked([ops.delete_op(r) for r in results])


def interleaved(contenders: dict[str, Callable[[], None]], reps: int, budget: float
                ) -> dict[str, float]:
    """Median ms per contender, running them round-robin so machine noise hits all alike."""
    for fn in contenders.values():
        fn()  # warm up (creates object nodes, warms the server)
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    start = time.perf_counter()
    for _ in range(reps):
        for name, fn in contenders.items():
            t = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t)
        if time.perf_counter() - start > budget:
            break
    return {name: statistics.median(v) * 1000 for name, v in samples.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,10,100,1000")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per N, all contenders")
    ap.add_argument("--out", help="append the Markdown table to this file")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]

    # ZooKeeper's default container sweep (60 s), as a production server has
    hosts, server = start_zookeeper(container_check_ms=60000)
    try:
        client = KazooClient(hosts=hosts, timeout=30)
        client.start(timeout=30)
        ops = ZkOps(client)
        mgr = LockManager(client=client, root="/bench-zklock", retries=0)
        rows = []
        for n in sizes:
            reps = max(3, min(50, 2000 // (n + 3)))
            client.ensure_path("/bench-hive")
            client.ensure_path("/bench-kazoo")
            paths = floor_setup(client, "/bench-floor", n)

            def zk_cycle(n: int = n) -> None:
                with mgr.acquire(request(n)):
                    pass

            results = interleaved({
                "zklock": zk_cycle,
                "floor": lambda paths=paths: floor_cycle(ops, paths, False),
                "floor_mr": lambda paths=paths: floor_cycle(ops, paths, True),
                "hive": lambda n=n: hive_cycle(client, "/bench-hive", n),
                "kazoo": lambda n=n: kazoo_cycle(client, "/bench-kazoo", n),
            }, reps, args.budget)
            rows.append((n, results))
            print(f"N={n}: " + ", ".join(f"{c} {v:.1f} ms" for c, v in results.items()),
                  file=sys.stderr)
        table = [
            "| N objects (+2 parents) | zklock ms | floor ms | floor+multiRead ms "
            "| Hive algorithm ms | kazoo recipe ms | zklock / floor | zklock / floor+multiRead "
            "| Hive / zklock | kazoo / zklock |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for n, r in rows:
            z, f, fm, h, k = (r[c] for c in ("zklock", "floor", "floor_mr", "hive", "kazoo"))
            table.append(f"| {n} | {z:.1f} | {f:.1f} | {fm:.1f} | {h:.1f} | {k:.1f} "
                         f"| {z / f:.2f}x | {z / fm:.2f}x | {h / z:.1f}x | {k / z:.1f}x |")
        text = "\n".join(table)
        report(text, args.out)
        mgr.close()
        client.stop()
        client.close()
    finally:
        if server:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
