"""make demo: two lock holders contend for a partition, seen through `zklock show`.

Uses ZKLOCK_ZK when set; otherwise starts the embedded ZooKeeper in .zklock/
(and stops it again at the end if it started it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from zklock import LockManager, LockNotAcquired  # noqa: E402
from zklock.server import ZkServer  # noqa: E402

ZKLOCK = [str(Path(sys.executable).parent / "zklock")]


def show(hosts: str, *args: str) -> None:
    print(f"$ zklock show {' '.join(args)}".rstrip(), flush=True)
    subprocess.run(ZKLOCK + ["--zk", hosts, "--root", "/demo", "show", *args], check=False)


def main() -> int:
    hosts = os.environ.get("ZKLOCK_ZK")
    server = None
    if not hosts:
        server = ZkServer(Path(".zklock"), port=int(os.environ.get("ZKLOCK_DEMO_PORT", "2181")))
        started = server.pid() is None
        hosts = server.start()
        print(f"embedded ZooKeeper at {hosts}")
        if not started:
            server = None  # someone else's: leave it running
    try:
        alice = LockManager(hosts=hosts, root="/demo", user="alice")
        bob = LockManager(hosts=hosts, root="/demo", user="bob", retries=40,
                          retry_interval=0.25)
        part = "sales.orders/ds=2024-01-01"
        held = alice.acquire([(part, "X"), ("sales.customers", "S")], query_id="alice-q1",
                             query="INSERT OVERWRITE TABLE sales.orders PARTITION"
                                   " (ds='2024-01-01') SELECT ...")
        print(f"alice holds X on {part} (fencing token {held.fencing_token})")
        show(hosts, "--extended")
        try:
            bob.acquire([(part, "S")], query_id="bob-q1", retries=0)
        except LockNotAcquired as exc:
            print(f"bob is denied: {exc}")
        threading.Timer(2.0, held.release).start()
        print("bob retries while alice finishes her overwrite ...", flush=True)
        t0 = time.monotonic()
        with bob.acquire([(part, "S")], query_id="bob-q2", query="SELECT count(*) ...") as got:
            print(f"bob got S on {part} after {time.monotonic() - t0:.1f}s"
                  f" (fencing token {got.fencing_token})")
            show(hosts, "sales.orders")
        show(hosts)
        alice.close()
        bob.close()
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
