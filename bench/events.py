"""Does writing the lock event log slow the lock path? Acquire+release with and without it.

Run: ``.venv/bin/python bench/events.py``. One ZooKeeper (fsync on, started here unless
ZKLOCK_ZK is set); two LockManagers on the same server, one with ``event_log`` set, one
without; 300 interleaved pairs of acquire+release of a partition (3 locks with its
parents). Prints medians and the median paired difference.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import start_zookeeper  # noqa: E402

from zklock import LockManager  # noqa: E402

PAIRS = 300


def cycle(mgr: LockManager, i: int) -> float:
    t = time.perf_counter()
    mgr.acquire([(f"bench.t/p={i % 50}", "X")], query_id="bench").release()
    return time.perf_counter() - t


def main() -> None:
    hosts, server = start_zookeeper()
    log = Path(tempfile.mkdtemp()) / "events.jsonl"
    try:
        plain = LockManager(hosts=hosts, root="/bench-events", retries=0)
        logged = LockManager(hosts=hosts, root="/bench-events", retries=0, event_log=str(log),
                             job="bench")
        for i in range(30):  # warm up both
            cycle(plain, i)
            cycle(logged, i)
        a, b = [], []
        for i in range(PAIRS):
            first, second = (plain, logged) if i % 2 else (logged, plain)
            x, y = cycle(first, i), cycle(second, i)
            (a, b)[first is logged].append(x)
            (a, b)[second is logged].append(y)
        plain.close()
        logged.close()
    finally:
        if server is not None:
            server.stop()
    diffs = [y - x for x, y in zip(a, b)]
    lines = sum(1 for _ in open(log))
    print(f"| without event log | {statistics.median(a) * 1000:.2f} ms |")
    print(f"| with event log | {statistics.median(b) * 1000:.2f} ms |")
    print(f"| median paired difference | {statistics.median(diffs) * 1000:+.3f} ms"
          f" ({statistics.median(diffs) / statistics.median(a) * 100:+.1f}%) |")
    print(f"({lines} event lines written)")


if __name__ == "__main__":
    main()
