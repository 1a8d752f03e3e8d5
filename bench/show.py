"""Listing cost: `show` over 10k locks on 1k tables (issue 2: well under a second).

Run: ``.venv/bin/python bench/show.py`` (starts its own ZooKeeper unless ZKLOCK_ZK is set).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import start_zookeeper  # noqa: E402

from zklock import LockManager  # noqa: E402


def main() -> int:
    hosts, server = start_zookeeper(force_sync=False)
    try:
        mgr = LockManager(hosts=hosts, root="/bench-show", retries=0)
        held = []
        for db in range(10):  # 10 dbs x 100 tables x 8 partitions, all in S, plus parents
            req = [(f"db{db}.t{t}/p={p}", "S") for t in range(100) for p in range(8)]
            held.append(mgr.acquire(req))
        n = sum(len(h.held) for h in held)
        for extended in (False, True):
            samples = []
            for _ in range(5):
                t0 = time.perf_counter()
                got = mgr.show(extended=extended)
                samples.append(time.perf_counter() - t0)
            assert len(got) == n
            print(f"show(extended={extended}) of {n} locks on 1000 tables: "
                  f"median {statistics.median(samples) * 1000:.0f} ms")
        for h in held:
            h.release()
        mgr.close()
    finally:
        if server:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
