"""make flake-hunt: run the suite (or the given test files) several times under load.

Each run uses more pytest workers than the machine has cores, a CPU burner beside it (one
busy process per core: Debian's stress-ng when installed, else Python), and a random order
of the tests within each file (tests/shuffle.py, seeded per run; ``--keep-order`` turns it
off). Each failure is printed with its test id and the run it came from; the last line is
the summary: runs, tests, failures. Exit 1 when any run had a failure.

    make flake-hunt                                  # the whole suite, 3 runs
    make flake-hunt RUNS=5 HUNT="tests/spark tests/core/test_chaos.py"
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]


def burn() -> None:  # one busy core
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


class Burner:
    """A CPU burner: one busy process per core, stopped and reaped whatever happens."""

    def __init__(self, cores: int) -> None:
        self.cores = cores
        self.procs: list = []

    def __enter__(self) -> Burner:
        stress = shutil.which("stress-ng")
        if stress:
            self.procs = [subprocess.Popen([stress, "--cpu", str(self.cores), "--quiet"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        else:
            ctx = multiprocessing.get_context("spawn")
            self.procs = [ctx.Process(target=burn, daemon=True) for _ in range(self.cores)]
            for p in self.procs:
                p.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(30) if isinstance(p, subprocess.Popen) else p.join(30)

    @property
    def kind(self) -> str:
        return "stress-ng" if self.procs and isinstance(self.procs[0], subprocess.Popen) \
            else "python"


def results(junit: Path) -> tuple[int, list[str]]:
    """(tests run, failed test ids) of one run's JUnit XML."""
    try:
        tree = ET.parse(junit)
    except (OSError, ET.ParseError):
        return 0, ["<the run left no report: see its output above>"]
    tests, failed = 0, []
    for case in tree.iter("testcase"):
        if case.find("skipped") is not None:
            continue
        tests += 1
        if case.find("failure") is not None or case.find("error") is not None:
            module = case.get("classname", "").replace(".", "/")
            failed.append(f"{module}.py::{case.get('name')}")
    return tests, failed


def main() -> int:
    cores = os.cpu_count() or 2
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="test files or directories (default: all)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=cores + 2,
                        help="pytest workers (default: cores + 2)")
    parser.add_argument("--burners", type=int, default=cores,
                        help="busy processes beside the suite (default: one per core)")
    parser.add_argument("--keep-order", action="store_true",
                        help="run each file's tests in their written order")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="zklock-flake-hunt-"))
    total_tests = 0
    failures: list[tuple[int, str]] = []
    for run in range(1, args.runs + 1):
        seed = random.randrange(1 << 30)
        junit = out / f"run{run}.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-n", str(args.workers),
               "--dist", "loadfile", f"--junitxml={junit}", "-o", "junit_family=xunit1",
               *args.paths]
        env = dict(os.environ)
        if not args.keep_order:
            env["ZKLOCK_SHUFFLE_SEED"] = str(seed)
        order = "written order" if args.keep_order else f"shuffled within files, seed {seed}"
        print(f"== flake hunt run {run}/{args.runs}: {args.workers} workers, {args.burners}"
              f" burners, {order}", flush=True)
        started = time.monotonic()
        with Burner(args.burners) as burner:
            code = subprocess.call(cmd, cwd=PROJECT, env=env)
        tests, failed = results(junit)
        total_tests += tests
        failures += [(run, test) for test in failed]
        print(f"== run {run}: exit {code}, {tests} tests, {len(failed)} failed,"
              f" {time.monotonic() - started:.0f} s (burner: {burner.kind})", flush=True)
        for test in failed:
            print(f"FLAKE run {run}: {test}", flush=True)
        if code not in (0, 1) and not failed:  # an internal error or interruption
            failures.append((run, f"<pytest exit {code}>"))
    print("== flake hunt failures:" if failures else "== flake hunt: no failures")
    for run, test in failures:
        print(f"  run {run}: {test}")
    print(f"== flake hunt summary: {args.runs} runs, {total_tests} tests, {len(failures)}"
          f" failures (reports in {out})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
