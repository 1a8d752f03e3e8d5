"""Acquire+release of N-object lock sets: zklock vs Hive's and Curator's real code vs the floor.

Run: ``make bench-locks`` (or ``.venv/bin/python bench/locks.py``). It starts
its own ZooKeeper (fsync on, as in production) unless ZKLOCK_ZK is set, runs
every contender against the same server in one process (Hive's and Curator's
classes in a local Spark JVM beside it, through py4j: one call to lock a set,
one to release it), and prints a Markdown table (``--out`` appends it to a file).

Contenders, each on N partitions of one table plus the database and table:
- zklock: LockManager.acquire + release;
- hive: Hive 2.3.10's own ZooKeeperHiveLockManager (PySpark's hive-exec jar):
  ``lock(List<HiveLockObj>, false, null)`` and ``releaseLocks``;
- curator: Curator 5.9's InterProcessMultiLock over one InterProcessReadWriteLock
  per object (its read or write lock): ``acquire()`` and ``release()``;
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
from typing import Any

from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import local_spark, report, start_zookeeper  # noqa: E402

from zklock import LockManager  # noqa: E402
from zklock.locks.locknode import LockData  # noqa: E402
from zklock.locks.lockrequest import normalize  # noqa: E402
from zklock.zk import EPHEMERAL, SEQUENTIAL, ZkOps  # noqa: E402

DATA = LockData(user="bench", host="bench-host", pid=1, session="0x1", query_id="q-bench",
                query="INSERT INTO bench.t PARTITION (p) SELECT ...",
                acquired_at="2026-01-01T00:00:00.000Z").to_bytes()


def request(n: int) -> list[tuple[str, str]]:
    return [(f"bench.t/p={i}", "X") for i in range(n)]


class HiveContender:
    """Hive's ZooKeeperHiveLockManager in the Spark JVM, with its lock list built once."""

    def __init__(self, spark: Any, hosts: str, namespace: str) -> None:
        jvm = spark._jvm
        self.spark, self.jvm = spark, jvm
        self.lockmgr = jvm.org.apache.hadoop.hive.ql.lockmgr
        host, _, port = hosts.split(",")[0].rpartition(":")
        conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
        for key, value in {"hive.zookeeper.quorum": host, "hive.zookeeper.client.port": port,
                           "hive.zookeeper.namespace": namespace,
                           "hive.lock.numretries": "1",
                           "hive.lock.sleep.between.retries": "0s"}.items():
            conf.set(key, value)
        self.manager = self.lockmgr.zookeeper.ZooKeeperHiveLockManager()
        self.manager.setContext(self.lockmgr.HiveLockManagerCtx(conf))

    def request(self, n: int) -> Any:
        data = getattr(self.lockmgr, "HiveLockObject$HiveLockObjectData")(
            "q-bench", str(int(time.time() * 1000)), "IMPLICIT", "INSERT INTO bench.t ...")
        objs = self.jvm.java.util.ArrayList()
        gateway = self.spark.sparkContext._gateway
        for t in normalize(request(n)):
            parts = [t.obj.db] + ([t.obj.table] if t.obj.table else []) + [
                f"{k}={v}" for k, v in t.obj.partition]
            names = gateway.new_array(self.jvm.java.lang.String, len(parts))
            for i, p in enumerate(parts):
                names[i] = p
            mode = (self.lockmgr.HiveLockMode.EXCLUSIVE if t.mode.value == "X"
                    else self.lockmgr.HiveLockMode.SHARED)
            objs.add(self.lockmgr.HiveLockObj(self.lockmgr.HiveLockObject(names, data), mode))
        return objs

    def cycle(self, objs: Any) -> None:
        held = self.manager.lock(objs, False, None)
        if held is None:
            raise RuntimeError("Hive's lock manager denied an uncontended set")
        self.manager.releaseLocks(held)


class CuratorContender:
    """Curator's InterProcessMultiLock over InterProcessReadWriteLocks, in the Spark JVM."""

    def __init__(self, spark: Any, hosts: str) -> None:
        jvm = spark._jvm
        self.jvm = jvm
        curator = jvm.org.apache.curator
        self.client = curator.framework.CuratorFrameworkFactory.newClient(
            hosts, curator.retry.ExponentialBackoffRetry(100, 3))
        self.client.start()
        self.client.blockUntilConnected()

    def request(self, root: str, n: int) -> Any:
        recipes = self.jvm.org.apache.curator.framework.recipes.locks
        locks = self.jvm.java.util.ArrayList()
        for t in normalize(request(n)):
            rw = recipes.InterProcessReadWriteLock(self.client, t.obj.znode(root))
            locks.add(rw.writeLock() if t.mode.value == "X" else rw.readLock())
        return recipes.InterProcessMultiLock(locks)

    @staticmethod
    def cycle(multi: Any) -> None:
        multi.acquire()
        multi.release()

    def close(self) -> None:
        self.client.close()


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
        spark = local_spark("zklock-bench-locks-")
        hive = HiveContender(spark, hosts, "bench-hive")
        curator = CuratorContender(spark, hosts)
        rows = []
        for n in sizes:
            reps = max(3, min(50, 2000 // (n + 3)))
            client.ensure_path("/bench-hive")
            client.ensure_path("/bench-kazoo")
            paths = floor_setup(client, "/bench-floor", n)
            hive_objs = hive.request(n)
            multi = curator.request("/bench-curator", n)

            def zk_cycle(n: int = n) -> None:
                with mgr.acquire(request(n)):
                    pass

            results = interleaved({
                "zklock": zk_cycle,
                "floor": lambda paths=paths: floor_cycle(ops, paths, False),
                "floor_mr": lambda paths=paths: floor_cycle(ops, paths, True),
                "hive": lambda objs=hive_objs: hive.cycle(objs),
                "curator": lambda m=multi: curator.cycle(m),
                "kazoo": lambda n=n: kazoo_cycle(client, "/bench-kazoo", n),
            }, reps, args.budget)
            rows.append((n, results))
            print(f"N={n}: " + ", ".join(f"{c} {v:.1f} ms" for c, v in results.items()),
                  file=sys.stderr)
        table = [
            "| N objects (+2 parents) | zklock ms | floor ms | floor+multiRead ms "
            "| Hive 2.3.10 ms | Curator 5.9 ms | kazoo recipe ms | zklock / floor "
            "| Hive / zklock | Curator / zklock | kazoo / zklock |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for n, r in rows:
            z, f, fm, h, c, k = (r[x] for x in ("zklock", "floor", "floor_mr", "hive",
                                                "curator", "kazoo"))
            table.append(f"| {n} | {z:.1f} | {f:.1f} | {fm:.1f} | {h:.1f} | {c:.1f} | {k:.1f} "
                         f"| {z / f:.2f}x | {h / z:.1f}x | {c / z:.1f}x | {k / z:.1f}x |")
        text = "\n".join(table)
        report(text, args.out)
        curator.close()
        spark.stop()
        mgr.close()
        client.stop()
        client.close()
    finally:
        if server:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
