"""Concurrent partition writers with and without commit isolation, side by side in one run.

Run: ``.venv/bin/python bench/concurrent_writers.py [--rounds 2] [--writers 3] [--count 12]``.
Each round starts WRITERS Spark applications (zklock/testing/writers.py) that insert
COUNT partitions each into one table at the same time, once with Spark's staging as
it comes (``isolate_commits=false``, the baseline) and once with zklock's isolation;
then the same with one of the writers replaced by one whose jobs all fail half-way
(its own failures are not counted: the question is what it does to the others).
It reports failed inserts, and inserts that reported success but left their partition
short of files (output lost silently); both are correctness figures, so the comparison
is counts, not times.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from common import start_zookeeper


def one_round(hosts: str, isolate: bool, writers: int, count: int,
              bad: bool) -> tuple[int, int]:
    """(failed inserts of the good writers, their successful inserts short of files)."""
    wh = Path(tempfile.mkdtemp(prefix="zklock-writers-"))
    root = f"/bench-writers-{uuid.uuid4().hex[:8]}"
    names = [f"w{k}" for k in range(writers - 1 if bad else writers)] + (["bad"] if bad else [])
    procs = [subprocess.Popen([sys.executable, "-m", "zklock.testing.writers", hosts, root,
                               str(wh), name, str(len(names)), str(count), str(isolate)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for name in names]
    failed: set[str] = set()
    for p in procs:
        out, _ = p.communicate(timeout=900)
        failed.update(f.split(":", 1)[0] for f in json.loads(out.strip().splitlines()[-1])
                      ["failures"] if not f.startswith("bad"))
    short = 0  # inserts that reported success yet left their partition short of files
    for k in range(len(names) - (1 if bad else 0)):
        for i in range(count):
            if f"w{k}-{i}" in failed:
                continue
            part = wh / "t" / f"ds=w{k}-{i}"
            files = list(part.glob("*.parquet")) if part.exists() else []
            short += len(files) < 2  # every insert writes two files (two tasks)
    return len(failed), short


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--writers", type=int, default=3)
    ap.add_argument("--count", type=int, default=12)
    args = ap.parse_args()
    hosts, server = start_zookeeper()
    try:
        rows = []
        for bad in (False, True):
            totals = {False: [0, 0], True: [0, 0]}
            for _ in range(args.rounds):
                for isolate in (False, True):  # interleaved: the same machine state for both
                    failed, short = one_round(hosts, isolate, args.writers, args.count, bad)
                    totals[isolate][0] += failed
                    totals[isolate][1] += short
                    print(f"bad writer={bad} isolate_commits={isolate}: {failed} failed"
                          f" inserts, {short} successful inserts short of files", flush=True)
            good = args.writers - (1 if bad else 0)
            n = args.rounds * good * args.count
            beside = f"{good} writers and one whose jobs fail" if bad else f"{good} writers"
            for isolate, label in ((False, "Spark as it comes (`isolate_commits=false`)"),
                                   (True, "zklock (`isolate_commits=true`)")):
                rows.append(f"| {beside} | {label} | {n} | {totals[isolate][0]} |"
                            f" {totals[isolate][1]} |")
        print("\n| writers | staging | inserts | failed | succeeded but short of files |"
              "\n|---|---|---:|---:|---:|")
        print("\n".join(rows))
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
