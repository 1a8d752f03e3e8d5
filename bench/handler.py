"""kazoo's connection handler: its own (an epoll selector per wait) against PollingHandler.

Run: ``.venv/bin/python bench/handler.py``. It starts its own ZooKeeper (fsync on) unless
ZKLOCK_ZK is set and, in one process, times:

1. one wait on a ready socket, as kazoo's connection thread waits before every read
   and write of a request (about five waits a request);
2. acquire+release of N-object lock sets through a LockManager on each handler, the two
   clients alternating round by round on the same server.

Figures and command: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.handlers.threading import SequentialThreadingHandler

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import report, start_zookeeper  # noqa: E402

from zklock import LockManager  # noqa: E402
from zklock.handler import PollingHandler  # noqa: E402


def wait_us(handler: SequentialThreadingHandler, rounds: int = 50000) -> float:
    """Microseconds per select() on a socket that is ready."""
    a, b = socket.socketpair()
    b.send(b"x")
    try:
        start = time.perf_counter()
        for _ in range(rounds):
            handler.select([a, b], [], [], 1)
        return (time.perf_counter() - start) / rounds * 1e6
    finally:
        a.close()
        b.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,10,100")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--out", help="append the Markdown table to this file")
    args = ap.parse_args()
    handlers = {"kazoo's SequentialThreadingHandler": SequentialThreadingHandler,
                "PollingHandler": PollingHandler}
    waits = {name: wait_us(cls()) for name, cls in handlers.items()}
    hosts, server = start_zookeeper()
    managers = {}
    try:
        for name, cls in handlers.items():
            client = KazooClient(hosts=hosts, timeout=30, handler=cls())
            client.start(timeout=30)
            managers[name] = LockManager(client=client, root=f"/bench-handler-{cls.__name__}",
                                         retries=0)
        rows = []
        for n in (int(x) for x in args.sizes.split(",")):
            request = [(f"bench.t/p={i}", "X") for i in range(n)]
            samples: dict[str, list[float]] = {name: [] for name in managers}
            for i in range(max(5, args.rounds // max(1, n // 10))):
                for name, mgr in (managers.items() if i % 2 else
                                  reversed(list(managers.items()))):
                    t = time.perf_counter()
                    with mgr.acquire(request):
                        pass
                    samples[name].append(time.perf_counter() - t)
            rows.append((n, {name: statistics.median(v[2:]) * 1000
                             for name, v in samples.items()}))
            print(f"N={n}: {rows[-1][1]}", file=sys.stderr)
    finally:
        for mgr in managers.values():
            mgr.client.stop()
            mgr.client.close()
        if server is not None:
            server.stop()
    names = list(handlers)
    table = ["| | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names),
             "| one wait on a ready socket, us | "
             + " | ".join(f"{waits[n]:.1f}" for n in names) + " |"]
    table += [f"| acquire+release, N={n}, median ms | "
              + " | ".join(f"{r[name]:.2f}" for name in names) + " |" for n, r in rows]
    report("\n".join(table), args.out)


if __name__ == "__main__":
    main()
