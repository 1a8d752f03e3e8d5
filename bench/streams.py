"""What zklock adds to a micro-batch: a stream into a table under zklock against the same
stream in a bare Spark application, in one run.

Run: ``.venv/bin/python bench/streams.py`` (``--rounds``, ``--batches``, ``--out``). It starts
its own ZooKeeper (fsync on) unless ZKLOCK_ZK is set, measures a ZooKeeper write round trip
(bench/common.py: the median of 200 sets of a node), then runs ``--rounds`` rounds of three
applications, each kind first in turn (one local SparkSession each, never two at once: the
machine's cores are the applications'):

- **bare**: Spark as it ships, each stream into a Parquet table with ``toTable`` (Spark's
  file sink and its ``_spark_metadata`` log);
- **zklock**: the same application built with ``zklock.spark.configure`` and ``enforce``,
  its lock client on the run's ZooKeeper: each batch locked (X on the table, S on the
  database), committed through the fence and recorded once (docs/spark.md, "Streams and
  pipelines");
- **unlocked**: the zklock application with locking off (``support_concurrency=false``, as
  Hive's ``hive.support.concurrency``): zklock's sink, each batch an INSERT recorded once,
  but no lock taken, no ZooKeeper asked. zklock against it is what the locks cost; it
  against bare, what writing each batch as an INSERT rather than through Spark's file sink
  costs (the price of a table shared with batch writers).

Each application runs two streams into a table of its own: a processingTime stream of small
batches (the rate source, 10 rows a second, a batch every 200 ms, ``--batches`` of them), and
``availableNow`` over 100 JSON files, one file a batch. A batch's time is Spark's own figure
for it (``triggerExecution`` in the query's progress), and its sink's part (``addBatch``), where
all of zklock's work is. Reported: the median per batch of each side, the median of the
rounds' own differences (each a pair of applications run back to back) and their range, and
zklock's added time in units of a write round trip, against the target of at most 2 round trips
plus 1 ms.

The round trip is measured twice in the run: on an idle machine before the applications, and
while each application's streams run (a thread of the application sets a node of its own
every 20 ms; the same in both kinds, so its load is on both sides of the difference). The
second is what a write costs where a batch's own writes are made: on this 2-core machine
Spark's threads, its files' flushes and ZooKeeper's fsync share the cores and the disk, and a
write takes about twice its idle time. Both units are reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import report, start_zookeeper, write_round_trip  # noqa: E402

#: Spark's figures of a batch reported: its whole time, and the sink's part, where zklock
#: works (the batch's locks, its INSERT, its fence and records); the rest of a batch is
#: Spark's own (its offsets and commit logs), the same in both applications.
PARTS = ("triggerExecution", "addBatch")

#: The applications compared, each run once a round.
KINDS = ("bare", "zklock", "unlocked")

#: The first batches of each stream, left out: while the JIT compiles the batch's path, a
#: batch takes up to twice its settled time (zklock's longer path settles later), which the
#: difference would count as zklock's.
WARMUP = 20

#: Between two of the loaded round trip's sets: often enough for a median of hundreds per
#: application, seldom enough to be a small part of the machine's work.
PROBE_INTERVAL_S = 0.02


class LoadedRoundTrips:
    """A ZooKeeper write round trip measured while the application works: a thread setting
    a node of its own every PROBE_INTERVAL_S, each set timed (ms), until :meth:`stop`."""

    def __init__(self, hosts: str, node: str) -> None:
        from kazoo.client import KazooClient

        self.zk = KazooClient(hosts=hosts)
        self.zk.start()
        self.node = node
        self.zk.ensure_path(node)
        self.ms: list[float] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        while not self.done.wait(PROBE_INTERVAL_S):
            t0 = time.perf_counter()
            self.zk.set(self.node, str(i).encode())
            self.ms.append((time.perf_counter() - t0) * 1000)
            i += 1

    def stop(self) -> list[float]:
        """Stop measuring; every set's time, in ms."""
        self.done.set()
        self.thread.join()
        self.zk.stop()
        return self.ms


def application(kind: str, hosts: str, work: Path, batches: int) -> dict[str, list[float]]:
    """Run in a child process: the two streams of one application; each batch's ms."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName(f"bench-streams-{kind}")
               .config("spark.sql.warehouse.dir", str(work / "warehouse"))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    if kind in ("zklock", "unlocked"):
        from zklock import LockManager
        from zklock.config import Settings
        from zklock.spark import configure, enforce

        spark = configure(builder.config("spark.zklock.lockClient", "none")).getOrCreate()
        enforce(spark, LockManager(settings=Settings.resolve(dict(
            hosts=hosts, root="/bench-streams", retries=100, retry_interval=0.05,
            support_concurrency=kind == "zklock"))))
    else:
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, list[float]] = {}
    probe = LoadedRoundTrips(hosts, f"/bench-streams-rtt/{kind}")
    for name, stream, trigger in [
        ("processingTime", spark.readStream.format("rate").option("rowsPerSecond", 10).load()
         .selectExpr("CAST(value AS INT) AS id", "'r' AS ds"),
         {"processingTime": "200 milliseconds"}),
        ("availableNow", spark.readStream.schema("id INT, ds STRING")
         .option("maxFilesPerTrigger", 1).json(str(work.parent / "files")),
         {"availableNow": True}),
    ]:
        table = f"t_{name.lower()}"
        spark.sql(f"CREATE TABLE {table} (id INT, ds STRING) USING parquet")
        query = (stream.writeStream.option("checkpointLocation", str(work / name))
                 .trigger(**trigger).toTable(table))
        if name == "processingTime":
            while query.lastProgress is None or query.lastProgress["batchId"] < batches:
                time.sleep(0.2)  # poll: the query's progress
            query.stop()
        else:
            query.awaitTermination()
        batches = [p["durationMs"] for p in query.recentProgress if p["numInputRows"] > 0]
        for part in PARTS:
            out[f"{name} {part}"] = [d[part] for d in batches[WARMUP:]]
    out["loaded round trip"] = probe.stop()
    spark.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="applications of each kind")
    ap.add_argument("--batches", type=int, default=60, help="processingTime batches")
    ap.add_argument("--out", help="append the Markdown table to this file")
    ap.add_argument("--child", nargs=3, metavar=("KIND", "HOSTS", "WORK"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, hosts, work = args.child
        print(json.dumps(application(kind, hosts, Path(work), args.batches)))
        return 0

    hosts, server = start_zookeeper()
    base = Path(tempfile.mkdtemp(prefix="zklock-bench-streams-"))
    (base / "files").mkdir()
    for f in range(100):
        (base / "files" / f"f{f:03d}.json").write_text(
            "".join(json.dumps({"id": f * 10 + r, "ds": "f"}) + "\n" for r in range(10)))
    # each application's figures, by kind, in the order run: round i's pair is [i] of each
    runs: dict[str, list[dict[str, list[float]]]] = {kind: [] for kind in KINDS}
    try:
        rtt = write_round_trip(hosts)
        for i in range(args.rounds):
            for kind in KINDS[i % 3:] + KINDS[:i % 3]:  # each kind first in turn
                out = subprocess.run(
                    [sys.executable, __file__, "--batches", str(args.batches), "--child",
                     kind, hosts, str(base / f"{kind}-{i}")],
                    capture_output=True, text=True, check=True)
                runs[kind].append(json.loads(out.stdout.splitlines()[-1]))
    finally:
        if server is not None:
            server.stop()
    report("\n".join(table(runs, rtt)), args.out)
    return 0


def pooled(runs: list[dict[str, list[float]]], key: str) -> list[float]:
    """Every application's figures ``key``, in one list."""
    return [ms for run in runs for ms in run[key]]


def compare(runs: dict[str, list[dict[str, list[float]]]], base: str, kind: str,
            rtt: float, loaded: float) -> list[str]:
    """The table's rows of ``kind`` against ``base``: per stream and figure, the medians
    and the median of the rounds' own differences, with their range."""
    rows = []
    for name in ("processingTime", "availableNow"):
        for part in PARTS:
            key = f"{name} {part}"
            was = statistics.median(pooled(runs[base], key))
            now = statistics.median(pooled(runs[kind], key))
            pairs = [statistics.median(k[key]) - statistics.median(b[key])
                     for b, k in zip(runs[base], runs[kind])]
            added = statistics.median(pairs)
            rows.append(
                f"| {kind} vs {base} | {name} | {part} | {len(pooled(runs[base], key))} /"
                f" {len(pooled(runs[kind], key))} | {was:.1f} | {now:.1f}"
                f" | {added:+.1f} ({min(pairs):+.1f} to {max(pairs):+.1f})"
                f" | {added / rtt:+.1f} | {added / loaded:+.1f}"
                f" | {2 * rtt + 1:.1f} / {2 * loaded + 1:.1f} |")
    return rows


def table(runs: dict[str, list[dict[str, list[float]]]], rtt: float) -> list[str]:
    """The Markdown report of the applications' figures ``runs``, ``rtt`` the idle round
    trip (ms): zklock against bare (the issue's figure), and its two parts: the locks
    (zklock against unlocked) and the sink (unlocked against bare)."""
    every = [run for kind in KINDS for run in runs[kind]]
    loaded = statistics.median(pooled(every, "loaded round trip"))
    return [
        f"A ZooKeeper write round trip in this run: {rtt:.2f} ms idle (median of 200 sets,"
        f" fsync on); {loaded:.2f} ms while the applications' streams ran (median of"
        f" {len(pooled(every, 'loaded round trip'))} sets).",
        "",
        "| compared | stream | Spark's figure | batches | first ms a batch"
        " | second ms a batch | added ms: median of the rounds' (range)"
        " | in idle round trips | in loaded round trips"
        " | target ms (2 RTT + 1 ms): idle / loaded |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
        *compare(runs, "bare", "zklock", rtt, loaded),
        *compare(runs, "unlocked", "zklock", rtt, loaded),
        *compare(runs, "bare", "unlocked", rtt, loaded),
    ]


if __name__ == "__main__":
    sys.exit(main())
