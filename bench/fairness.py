"""Fairness with and without intents: writer wait under overlapping readers, reader wait
under steady writers, and what intents cost an uncontended acquire+release.

Run: ``.venv/bin/python bench/fairness.py`` (about three minutes). It starts its own
ZooKeeper (fsync on) unless ZKLOCK_ZK is set and prints Markdown tables (``--out``
appends them to a file).

1. Writer starvation (Hive's lock manager has it): three readers loop on S of one
   table, each holding ``--hold`` seconds, started a third of a hold apart, so one always
   holds. A writer asks for X, ``--samples`` times, at random phases; with intents off it
   gives up after ``--give-up`` seconds (reported as give-ups, their wait counted as the
   cap). Target with intents on: p99 <= 2 x hold + retry interval.
2. The mirror: three writers loop on X of one partition, holding ``--hold`` each; a reader
   asks for S.
3. Uncontended acquire+release of 1 and 100 partitions (plus parents), intents on and
   off, interleaved round-robin in one process (median ms; target: within 5%).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import report, start_zookeeper  # noqa: E402
from locks import interleaved, request  # noqa: E402

from zklock import LockManager, LockNotAcquired  # noqa: E402


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


class Looper:
    """One contender: takes ``spec``, holds it, releases, over and over, in its own session."""

    def __init__(self, hosts: str, root: str, spec: list, hold: float, start_after: float,
                 interval: float, intents: bool) -> None:
        # retries for about 6 holds at a time (intents on, a looper waits at most 3), then
        # asks again: stop() is seen within that time even when it starves (intents off)
        self.mgr = LockManager(hosts=hosts, root=root, intents=intents,
                               retries=max(1, int(6 * hold / interval)),
                               retry_interval=interval)
        self.spec, self.hold, self.start_after = spec, hold, start_after
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        self.stop.wait(self.start_after)
        while not self.stop.is_set():
            try:
                with self.mgr.acquire(self.spec):
                    self.stop.wait(self.hold)
            except LockNotAcquired:
                continue  # starved (intents off): ask again, as a caller of Hive's would

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.mgr.close()


def scenario(hosts: str, loop_spec: list, ask_spec: list, hold: float, interval: float,
             samples: int, give_up: float, intents: bool) -> tuple[list[float], int]:
    """Waits (s) of ``samples`` requests for ``ask_spec`` among three loopers, and give-ups."""
    root = f"/bench-fair-{uuid.uuid4().hex[:8]}"
    loopers = [Looper(hosts, root, loop_spec, hold, k * hold / 3, interval, intents)
               for k in range(3)]
    for lp in loopers:
        lp.thread.start()
    asker = LockManager(hosts=hosts, root=root, intents=intents,
                        retries=max(1, int(give_up / interval)), retry_interval=interval)
    waits, give_ups = [], 0
    rnd = random.Random(7)
    try:
        time.sleep(hold * 1.5)  # all loopers running and overlapping
        for _ in range(samples):
            time.sleep(rnd.uniform(0, hold))  # arrive at a random phase of the loop
            t0 = time.monotonic()
            try:
                with asker.acquire(ask_spec):
                    waits.append(time.monotonic() - t0)
                    time.sleep(0.05)
            except LockNotAcquired:
                waits.append(time.monotonic() - t0)
                give_ups += 1
    finally:
        for lp in loopers:
            lp.close()
        asker.close()
    return waits, give_ups


def uncontended(hosts: str, sizes: list[int], budget: float) -> dict[int, dict[str, float]]:
    on = LockManager(hosts=hosts, root="/bench-fair-on", retries=0, intents=True)
    off = LockManager(hosts=hosts, root="/bench-fair-off", retries=0, intents=False)
    out = {}
    try:
        for n in sizes:
            reps = max(20, min(400, 4000 // (n + 3)))

            def cycle(mgr: LockManager, n: int = n) -> None:
                with mgr.acquire(request(n)):
                    pass

            out[n] = interleaved({"on": lambda: cycle(on), "off": lambda: cycle(off)},
                                 reps, budget)
            print(f"uncontended N={n}: " + ", ".join(f"{k} {v:.2f} ms"
                                                     for k, v in out[n].items()),
                  file=sys.stderr)
    finally:
        on.close()
        off.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hold", type=float, default=0.5, help="seconds each looper holds")
    ap.add_argument("--interval", type=float, default=0.1, help="retry interval (s)")
    ap.add_argument("--samples", type=int, default=20, help="requests per scenario, intents on")
    ap.add_argument("--samples-off", type=int, default=6,
                    help="requests per scenario with intents off (each may wait --give-up)")
    ap.add_argument("--give-up", type=float, default=5.0, help="seconds before a request gives up")
    ap.add_argument("--budget", type=float, default=20.0, help="seconds per uncontended size")
    ap.add_argument("--out", help="append the Markdown tables to this file")
    args = ap.parse_args()
    hosts, server = start_zookeeper(container_check_ms=60000)
    table = "bench.t"
    part = "bench.t/p=1"
    lines = []
    try:
        rows = []
        for name, loop_spec, ask_spec in (
                ("writer X under 3 overlapping S readers", [(table, "S")], [(table, "X")]),
                ("reader S under 3 steady X writers", [(part, "X")], [(part, "S")])):
            for intents in (True, False):
                n = args.samples if intents else args.samples_off
                waits, give_ups = scenario(hosts, loop_spec, ask_spec, args.hold,
                                           args.interval, n, args.give_up, intents)
                rows.append((name, intents, waits, give_ups))
                print(f"{name}, intents {'on' if intents else 'off'}: p50"
                      f" {pct(waits, .5):.2f}s p99 {pct(waits, .99):.2f}s give-ups {give_ups}",
                      file=sys.stderr)
        bound = 2 * args.hold + args.interval
        lines += [f"Hold {args.hold:g} s, retry interval {args.interval:g} s, give-up after"
                  f" {args.give_up:g} s; target p99 <= 2 x hold + interval = {bound:.2f} s.", "",
                  "| scenario | intents | requests | p50 s | p99 s | max s | give-ups |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for name, intents, waits, give_ups in rows:
            lines.append(f"| {name} | {'on' if intents else 'off (Hive)'} | {len(waits)} "
                         f"| {pct(waits, .5):.2f} | {pct(waits, .99):.2f} | {max(waits):.2f} "
                         f"| {give_ups} |")
        res = uncontended(hosts, [1, 100], args.budget)
        lines += ["", "| N objects (+2 parents) | intents on ms | intents off ms | on / off |",
                  "|---:|---:|---:|---:|"]
        for n, r in res.items():
            lines.append(f"| {n} | {r['on']:.2f} | {r['off']:.2f} | {r['on'] / r['off']:.3f} |")
    finally:
        if server:
            server.stop()
    text = "\n".join(lines)
    report(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
