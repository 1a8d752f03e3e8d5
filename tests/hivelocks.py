"""Hive's own lock manager in a test: ZooKeeperHiveLockManager of hive-exec 2.3.10 (PySpark's
jars), driven through py4j in the test session's SparkSession JVM.

Nothing here re-implements Hive: every lock, unlock, listing and clean-up is Hive's code
talking to the test's real ZooKeeper. Hive's ZooKeeper client is a JVM-wide singleton
(CuratorFrameworkSingleton), so every instance talks to the first quorum it was given:
the session's one ZooKeeper server. Each instance has its own namespace (zklock's root).
"""

from __future__ import annotations

import time
from typing import Any, Optional


class HiveLocks:
    """One Hive lock manager on ``namespace`` (a zklock root without its leading '/')."""

    def __init__(self, spark: Any, hosts: str, namespace: str,
                 clean_extra_nodes: bool = False) -> None:
        self.spark = spark
        jvm = spark._jvm
        self._jvm = jvm
        self._lockmgr = jvm.org.apache.hadoop.hive.ql.lockmgr
        host, _, port = hosts.split(",")[0].rpartition(":")
        conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
        for key, value in {"hive.zookeeper.quorum": host, "hive.zookeeper.client.port": port,
                           "hive.zookeeper.namespace": namespace.lstrip("/"),
                           "hive.lock.numretries": "1", "hive.unlock.numretries": "1",
                           "hive.lock.sleep.between.retries": "0s",
                           "hive.zookeeper.clean.extra.nodes": str(clean_extra_nodes).lower(),
                           }.items():
            conf.set(key, value)
        self.conf = conf
        # Hive's getLocks builds its objects through Hive.get(conf), which would register
        # every function (and needs LLAP's jars, which PySpark does not ship); a Hive client
        # made without that registration, on this thread, is the one it then uses
        jvm.org.apache.hadoop.hive.ql.metadata.Hive.getWithoutRegisterFns(conf)
        self.manager = self._lockmgr.zookeeper.ZooKeeperHiveLockManager()
        self.manager.setContext(self._lockmgr.HiveLockManagerCtx(conf))

    def _object(self, name: str, query: str, explicit: bool) -> Any:
        """``db``, ``db/t`` or ``db/t/k=v/...`` as Hive's lock object with its lock data."""
        data = getattr(self._lockmgr, "HiveLockObject$HiveLockObjectData")(
            f"hive-{time.monotonic_ns()}", str(int(time.time() * 1000)),
            "EXPLICIT" if explicit else "IMPLICIT", query)
        parts = name.split("/")
        array = self.spark.sparkContext._gateway.new_array(self._jvm.java.lang.String,
                                                           len(parts))
        for i, p in enumerate(parts):
            array[i] = p
        return self._lockmgr.HiveLockObject(array, data)

    def _mode(self, mode: str) -> Any:
        return getattr(self._lockmgr.HiveLockMode, {"S": "SHARED", "X": "EXCLUSIVE"}
                       .get(mode, mode))

    def lock(self, name: str, mode: str, explicit: bool = False,
             query: str = "hive test query") -> Optional[Any]:
        """Hive's lock(obj, mode, keepAlive): the lock, or None when a conflict denies it."""
        return self.manager.lock(self._object(name, query, explicit), self._mode(mode),
                                 explicit)

    def lock_all(self, wanted: list[tuple[str, str]], explicit: bool = False) -> Optional[Any]:
        """Hive's lock(List<HiveLockObj>, keepAlive): every lock or none (None)."""
        objs = self._jvm.java.util.ArrayList()
        for name, mode in wanted:
            objs.add(self._lockmgr.HiveLockObj(self._object(name, "hive set", explicit),
                                               self._mode(mode)))
        return self.manager.lock(objs, explicit, None)

    def unlock(self, lock: Any) -> None:
        self.manager.unlock(lock)

    def release(self, locks: Any) -> None:
        self.manager.releaseLocks(locks)

    def locks(self) -> list[tuple[str, str, Optional[str]]]:
        """Hive's getLocks (what its SHOW LOCKS prints): (object, mode, lock data)."""
        out = []
        for lock in self.manager.getLocks(False, True):
            obj = lock.getHiveLockObject()
            data = obj.getData()
            out.append((str(obj.getName()), str(lock.getHiveLockMode().toString()),
                        str(data.toString()) if data is not None else None))
        return out

    def close(self) -> None:
        """Hive's close: with clean_extra_nodes, it deletes the namespace's extra leaves."""
        self.manager.close()
