"""What zklock adds to a Spark statement: zklock's application against a bare one, side by side.

Run: ``make bench-spark`` (or ``.venv/bin/python bench/spark_overhead.py``).
It starts its own ZooKeeper (fsync on) unless ZKLOCK_ZK is set, then two Spark
applications of the same shape, each in a process of its own (one JVM cannot be both):

- **bare**: a SparkSession built without zklock;
- **zklock**: one built with ``zklock.spark.configure`` (the engine extension) and a
  LockingSession, whose LockManager is also the engine's lock client.

The driver sends each statement to both, interleaved (the order alternating) so that noise
hits both sides, and each application times the statement itself, so the pipe between
them costs nothing. Per statement it reports the medians and the median of the paired
differences (zklock minus bare, run back to back), and the crossings between Python and
the JVM each application made for it, counted by instrumenting py4j (its client's
commands, Python to JVM, and its callback server's calls, JVM to Python; py4j's own
garbage-collection messages, which any PySpark program sends, apart):

- a LockingSession ``INSERT INTO t PARTITION (ds, hr) VALUES (...)`` (4 objects) and a
  ``SELECT count(*)`` over one ds prefix (10 objects), both locked by the engine, as the
  LockingSession's SparkSession;
- the same INSERT through the plain session of zklock's application, locked by the engine;
- the plain session's reads, which the engine read-locks: a ``count()`` of a table, a
  ``collect()`` of 1,000 rows and a join of two tables;
- the engine's check of a LockingSession statement (its lock nodes still exist: a sync and
  an exists, pipelined), against one bare ZooKeeper read round trip.

``--connect`` does the same over Spark Connect: a bare Connect server (Spark's own, through
spark-submit) against zklock's (``zklock spark connect-server start``: plugin, engine, lock
client), with a LockingSession client and a plain client (its INSERT, count, collect and
join). ``--out`` appends the Markdown.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import (  # noqa: E402
    csv_sink_conf,
    engine_totals,
    local_spark,
    median_ms,
    report,
    start_zookeeper,
    write_round_trip,
)

INSERT = "INSERT INTO bench.t PARTITION (ds='d1', hr=1) VALUES ({i}, 1.0)"
SELECT = "SELECT count(*) FROM bench.t WHERE ds = 'd0'"
SETUP = ["CREATE DATABASE IF NOT EXISTS bench",
         "CREATE TABLE IF NOT EXISTS bench.t (id INT, amt DOUBLE, ds STRING, hr INT)"
         " USING parquet PARTITIONED BY (ds, hr)",
         *[f"INSERT INTO bench.t PARTITION (ds='d0', hr={hr}) VALUES (1, 1.0)"
           for hr in range(7)],
         "CREATE TABLE IF NOT EXISTS bench.k (id INT, name STRING) USING parquet",
         "INSERT INTO bench.k SELECT id, concat('k', id) FROM range(1000)"]
#: Reads of the plain session: locked by zklock's engine (S on what each reads), not by a
#: LockingSession; the bare application runs the same.
PLAIN_READS = {
    "plain_count": lambda spark: spark.table("bench.k").count(),
    "plain_collect": lambda spark: spark.table("bench.k").collect(),
    "plain_join": lambda spark: spark.sql("SELECT count(*) FROM bench.k k JOIN bench.t t"
                                          " ON k.id = t.id").collect(),
}


# ---- the applications -----------------------------------------------------------------
class Crossings:
    """Counts py4j's crossings in this process: commands Python sends the JVM (on any
    thread) and the JVM's calls into Python (callbacks: zklock's lock client); py4j's
    messages that free Java objects (its finalizer's, which any PySpark program sends) are
    not counted."""

    def __init__(self) -> None:
        import py4j.clientserver as cs
        from py4j import protocol

        self.to_jvm = self.callbacks = 0
        send, call = cs.ClientServerConnection.send_command, cs.ClientServerConnection._call_proxy
        gc_prefix = protocol.MEMORY_COMMAND_NAME + protocol.MEMORY_DEL_SUBCOMMAND_NAME

        def counted_send(connection: Any, command: str) -> Any:
            if not command.startswith(gc_prefix):
                self.to_jvm += 1
            return send(connection, command)

        def counted_call(connection: Any, obj_id: str, input: Any) -> Any:
            self.callbacks += 1
            return call(connection, obj_id, input)

        cs.ClientServerConnection.send_command = counted_send
        cs.ClientServerConnection._call_proxy = counted_call

    def mark(self) -> tuple[int, int]:
        return self.to_jvm, self.callbacks


def serve(kind: str, hosts: str) -> int:
    """One application (``bare`` or ``zklock``): runs what the driver asks, one JSON line
    each way, and answers with the seconds the statement took here."""
    answers = os.fdopen(os.dup(1), "w")  # the driver reads answers only: all else to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if kind == "bare":
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[2]")
                 .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="zklock-bench-"))
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        session = spark
    else:
        from zklock.spark import LockingSession

        spark = local_spark("zklock-bench-wh-")
        session = LockingSession(spark, hosts=hosts, root="/bench-spark", retries=0)
    for stmt in SETUP:
        session.sql(stmt)
    ops = {"insert": lambda i: session.sql(INSERT.format(i=i)),
           "select": lambda i: session.sql(SELECT).collect(),
           "engine_insert": lambda i: spark.sql(INSERT.format(i=i)),
           **{op: (lambda i, read=read: read(spark)) for op, read in PLAIN_READS.items()}}
    if kind == "zklock":
        ops["check"], ops["check1"] = engine_checks(session)
        ops["zk_read"] = zk_read(session)
        ops["py4j"] = lambda i: spark._jvm.java.lang.System.nanoTime()
    crossings = Crossings()
    print(json.dumps({"ready": True}), file=answers, flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "totals":  # zklock's source in Spark's metrics system
            from zklock.spark.lock_client import engine_of

            print(str(engine_of(spark).lockTotals()), file=answers, flush=True)
            continue
        to_jvm, callbacks = crossings.mark()
        t0 = time.perf_counter()
        ops[req["op"]](req["i"])
        took = time.perf_counter() - t0
        # (callbacks are counted as they start: a release Spark's listener bus makes after the
        # statement returned, a read's, may count with the next statement or with none)
        print(json.dumps({"s": took, "to_jvm": crossings.to_jvm - to_jvm,
                          "callbacks": crossings.callbacks - callbacks}),
              file=answers, flush=True)
    return 0


def engine_checks(locking: Any) -> tuple[Any, Any]:
    """What the engine adds to a LockingSession statement: CommitFence.exist of its nodes
    (EngineGuard.java calls it before the command runs), here on a held INSERT's set (taken
    at the first check: the INSERTs measured before must not wait for it); and the same of
    its first node alone."""
    from py4j.java_collections import ListConverter

    held: list[Any] = []

    def check(nodes: Optional[int]) -> Any:
        def run(i: int) -> None:
            if not held:
                lockset = locking.manager.acquire(
                    locking.explain_locks(INSERT.format(i=0)).targets)
                held.append(lockset)
            gateway = locking.spark.sparkContext._gateway
            paths = ListConverter().convert(held[0].node_paths[:nodes],
                                            gateway._gateway_client)
            locking.spark._jvm.zklock.commit.CommitFence.exist(held[0].connect_string, paths)
        return run
    return check(None), check(1)


def zk_read(locking: Any) -> Any:
    """One bare ZooKeeper read round trip (an exists) from the application's own client."""
    client = locking.manager.client
    return lambda i: client.exists("/bench-spark")


class App:
    """The driver's end of one application process."""

    def __init__(self, kind: str, hosts: str, tree: Optional[Path] = None) -> None:
        """``tree``: a checkout of zklock at another commit whose application to run (its
        own copy of this script, its own jar), for a before-and-after in one run."""
        script = Path(__file__) if tree is None else tree / "bench" / Path(__file__).name
        self.proc = subprocess.Popen([sys.executable, str(script), "--serve", kind, "--hosts",
                                      hosts],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the {kind} application did not start")
        self.crossings: dict[str, list[tuple[int, int]]] = {}

    def crossings_of(self, op: str) -> tuple[float, float]:
        """The median (Python to JVM, JVM to Python) crossings of ``op``'s runs."""
        runs = self.crossings.get(op, [(0, 0)])
        return (sorted(r[0] for r in runs)[len(runs) // 2],
                sorted(r[1] for r in runs)[len(runs) // 2])

    def run(self, op: str, i: int) -> float:
        """The seconds ``op`` took; its crossings are kept in :attr:`crossings`."""
        self.proc.stdin.write(json.dumps({"op": op, "i": i}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        self.crossings.setdefault(op, []).append((answer["to_jvm"], answer["callbacks"]))
        return float(answer["s"])

    def totals(self) -> dict[str, float]:
        """zklock's application totals (LockMetricsSource.java), as Spark's sinks see them."""
        self.proc.stdin.write(json.dumps({"op": "totals"}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


# ---- measuring ------------------------------------------------------------------------
def side_by_side(cases: dict[str, tuple[Any, ...]], reps: int, warm: int = 10) -> list:
    """Per case (name, [median ms of each contender], [median paired difference ms of the
    last contender, zklock's, against each other one]). A case is its contenders, each a
    ``run(i) -> seconds``; every rep runs them all back to back, in an order that cycles
    through every permutation, so that noise (and who runs first) hits each side alike."""
    rows = []
    # every case warmed before any is measured: the first case measured alone paid the
    # JVMs' warm-up (a LockingSession INSERT once showed +17 ms against +8 ms for the same
    # statement of the plain session measured after it)
    for runs in cases.values():
        for i in range(warm):
            for run in runs:
                run(i)
    for name, runs in cases.items():
        orders = list(itertools.permutations(range(len(runs))))
        times: list[list[float]] = [[] for _ in runs]
        diffs: list[list[float]] = [[] for _ in runs[:-1]]
        for i in range(reps):
            took = {}
            for k in orders[i % len(orders)]:
                took[k] = runs[k](i)
            for k, t in took.items():
                times[k].append(t)
            for k in range(len(runs) - 1):
                diffs[k].append(took[len(runs) - 1] - took[k])
        rows.append((name, [median_ms(t) for t in times], [median_ms(d) for d in diffs]))
        print(f"{name}: " + ", ".join(f"{m:.1f}" for m in rows[-1][1]) + " ms; differences "
              + ", ".join(f"{d:+.1f}" for d in rows[-1][2]) + " ms", file=sys.stderr)
    return rows


def markdown(title: str, labels: list[str], rows: list,
             crossings: Optional[list] = None) -> str:
    """The table of :func:`side_by_side`'s ``rows``, its contenders named by ``labels``
    (zklock's last); ``crossings``, per row: (bare, zklock) medians of (Python to JVM, JVM
    to Python) crossings."""
    head = ("| statement | " + " | ".join(f"{label} ms" for label in labels) + " | "
            + " | ".join(f"paired difference against {label} ms (%)" for label in labels[:-1])
            + " |")
    rule = "|---|" + "---:|" * (2 * len(labels) - 1)
    if crossings is not None:
        head += " py4j calls bare / zklock | callbacks (JVM to Python) |"
        rule += "---:|---:|"
    out = [title, "", head, rule]
    for k, (name, medians, diffs) in enumerate(rows):
        line = (f"| {name} | " + " | ".join(f"{m:.1f}" for m in medians) + " | "
                + " | ".join(f"{d:+.1f} ({100 * d / m:+.1f}%)" for d, m in zip(diffs, medians))
                + " |")
        if crossings is not None:
            (bj, _), (zj, zc) = crossings[k]
            line += f" {bj:g} / {zj:g} | {zc:g} |"
        out.append(line)
    return "\n".join(out)


#: The classic cases: (the bare application's op, zklock's).
CLASSIC = {
    "LockingSession `INSERT INTO t PARTITION (ds, hr) VALUES`": ("insert", "insert"),
    "LockingSession `SELECT count(*) ... WHERE ds = 'd0'`": ("select", "select"),
    "plain session `INSERT`, locked by the engine": ("insert", "engine_insert"),
    "plain session `count()` of a table, read-locked by the engine":
        ("plain_count", "plain_count"),
    "plain session `collect()` of 1,000 rows, read-locked by the engine":
        ("plain_collect", "plain_collect"),
    "plain session join of two tables, read-locked by the engine": ("plain_join", "plain_join"),
}


def classic_tables(hosts: str, reps: int, before: Optional[Path] = None) -> str:
    bare, ours = App("bare", hosts), App("zklock", hosts)
    earlier = App("zklock", hosts, before) if before is not None else None
    against_before: list = []
    try:
        rows = side_by_side({
            name: (lambda i, op=b: bare.run(op, i), lambda i, op=z: ours.run(op, i))
            for name, (b, z) in CLASSIC.items()}, reps)
        if earlier is not None:
            # warmed as long as this application was by the run above: a JVM keeps getting
            # faster over its first hundreds of statements
            against_before = side_by_side({
                name: (lambda i, op=z: earlier.run(op, i), lambda i, op=z: ours.run(op, i))
                for name, (b, z) in CLASSIC.items()}, reps, warm=reps + 10)
        crossings = [(bare.crossings_of(b), ours.crossings_of(z)) for b, z in CLASSIC.values()]
        check = [ours.run("check", i) for i in range(reps)]
        check1 = [ours.run("check1", i) for i in range(reps)]
        read = [ours.run("zk_read", i) for i in range(reps)]
        py4j = [ours.run("py4j", i) for i in range(reps)]
        totals = ours.totals()
    finally:
        bare.close()
        ours.close()
        if earlier is not None:
            earlier.close()
    text = markdown("Classic (two local applications, 2 cores each, one ZooKeeper):",
                    ["bare", "zklock"], rows, crossings)
    own = median_ms(check) - median_ms(py4j)
    text += (f"\n\nThe engine's check of a LockingSession statement (its 4 lock nodes"
             f" still exist: 4 exists, pipelined): {own:.2f} ms (called through py4j here:"
             f" {median_ms(check):.2f} ms, less an empty py4j call, {median_ms(py4j):.2f} ms);"
             f" the same check of one node (one read round trip of the JVM's ZooKeeper client):"
             f" {median_ms(check1) - median_ms(py4j):.2f} ms; one bare ZooKeeper read round"
             f" trip from Python (kazoo exists): {median_ms(read):.2f} ms."
             f"\n\nFresh file listings over the whole run (zklock's source in Spark's metrics"
             f" system): {totals.get('fileIndexesListed', 0):.0f} file indexes listed again, by"
             f" {totals.get('fileListing', 0):.0f} statements, at"
             f" {totals.get('fileListingMedianMs', 0):.2f} ms each (median);"
             f" {totals.get('fileIndexesKept', 0):.0f} kept, their tables unlocked by anyone"
             f" since.\n\nCommands' ends (the same source): {totals.get('statementEnd', 0):.0f}"
             f" commands, {totals.get('releasesAfterReturn', 0):.0f} of them released after"
             f" they returned; their end took {totals.get('statementEndMedianMs', 0):.2f} ms on"
             f" their path (median; the check of their nodes, where the fence had not made"
             f" it, or their release). The grant as the engine sees it (lockWait: the"
             f" callback to the lock client and its answer):"
             f" {totals.get('lockWaitMedianMs', 0):.2f} ms median over"
             f" {totals.get('lockWait', 0):.0f}.")
    if against_before:
        text += "\n\n" + "\n".join(
            [f"zklock here against zklock at {before} (`--before`), same run, the same"
             " statements back to back, the order alternating:", "",
             "| statement | before ms | here ms | paired difference ms |",
             "|---|---:|---:|---:|"]
            + [f"| {n} | {b:.1f} | {z:.1f} | {d:+.1f} |" for n, (b, z), (d,) in against_before])
    return text


def serve_connect(port: int, warehouse: str) -> int:
    """A bare Spark Connect server hosted as zklock's is (zklock/cli/connect_host.py: a
    PySpark process starting Spark's Connect service in its JVM) but without zklock's
    extension, plugin or lock client, so that zklock's server is also measured against the
    same hosting. Serves until its stdin closes."""
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.appName("bare Spark Connect server")
             .config("spark.connect.grpc.binding.port", str(port))
             .config("spark.connect.grpc.binding.address", "127.0.0.1")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.warehouse.dir", warehouse).getOrCreate())
    spark._jvm.org.apache.spark.sql.connect.service.SparkConnectService.start(
        spark.sparkContext._jsc.sc())
    sys.stdin.read()
    spark.stop()
    return 0


def connect_client(remote: str, wait: float = 180.0) -> Any:
    """A Connect session of the server at ``remote``, once it answers a query."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    deadline = time.monotonic() + wait
    while True:
        try:
            client = ConnectSession.builder.remote(remote).create()
            client.sql("SELECT 1").collect()
            return client
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


#: The Connect servers' engine figures read from zklock's server (LockMetricsSource.java).
CONNECT_FIGURES = ("lockWait", "statementEnd", "fileListing", "statementsLocked",
                   "releasesAfterReturn")


def connect_tables(hosts: str, reps: int) -> str:
    """The same statements over Spark Connect: zklock's server against two bare ones, Spark's
    own (spark-submit) and one hosted as zklock's is (:func:`serve_connect`)."""
    from zklock.cli.connect_server import SERVER_CLASS, ConnectServer, pyspark_home

    from zklock.servers.ports import free_port
    from zklock.spark import LockingSession

    state = Path(tempfile.mkdtemp(prefix="zklock-bench-connect-"))
    home = pyspark_home()
    submitted_port, hosted_port = free_port(), free_port()
    submitted = subprocess.Popen(
        [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS,
         "--conf", f"spark.connect.grpc.binding.port={submitted_port}",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
         "--conf", f"spark.sql.warehouse.dir={state / 'submitted-warehouse'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=state,
        env={**os.environ, "SPARK_HOME": str(home), "SPARK_CONNECT_MODE": "0"})
    hosted = subprocess.Popen(
        [sys.executable, __file__, "--serve-connect", str(hosted_port),
         "--warehouse", str(state / "hosted-warehouse")],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        cwd=state)
    metrics = state / "metrics"
    metrics.mkdir()
    # one root for the server and the LockingSession client
    server = ConnectServer(state, port=free_port(), warehouse=str(state / "warehouse"),
                           conf={"spark.sql.shuffle.partitions": "2",
                                 **csv_sink_conf(metrics)},
                           locks={"spark.zklock.zookeeper.quorum": hosts,
                                  "spark.zklock.root": "/bench-spark-connect"})
    try:  # the bare servers are stopped whatever fails, zklock's start included
        server.start()
        bares = [connect_client(f"sc://127.0.0.1:{p}") for p in (submitted_port, hosted_port)]
        cs = connect_client(server.remote)
        locking = LockingSession(cs, hosts=hosts, root="/bench-spark-connect", retries=0)
        for stmt in SETUP:
            for bare in bares:
                bare.sql(stmt)
            cs.sql(stmt)  # a plain client: the server locks it

        def timed(fn: Any) -> Any:
            def run(i: int) -> float:
                t0 = time.perf_counter()
                fn(i)
                return time.perf_counter() - t0
            return run

        def case(bare_run: Any, ours: Any) -> tuple[Any, ...]:
            """Each bare server running ``bare_run(session, i)``, then zklock's ``ours``."""
            return (*[timed(lambda i, b=b: bare_run(b, i)) for b in bares], timed(ours))

        def insert(session: Any, i: int) -> Any:
            return session.sql(INSERT.format(i=i))

        def select(session: Any, i: int) -> Any:
            return session.sql(SELECT).collect()

        rows = side_by_side({
            "LockingSession `INSERT INTO t PARTITION (ds, hr) VALUES`":
                case(insert, lambda i: insert(locking, i)),
            "LockingSession `SELECT count(*) ... WHERE ds = 'd0'`":
                case(select, lambda i: select(locking, i)),
            "plain client `INSERT`, locked by zklock's server":
                case(insert, lambda i: insert(cs, i)),
            **{f"plain client {label}, read-locked by zklock's server":
               case(lambda session, i, read=read: read(session), lambda i, read=read: read(cs))
               for label, read in [("`count()` of a table", PLAIN_READS["plain_count"]),
                                   ("`collect()` of 1,000 rows", PLAIN_READS["plain_collect"]),
                                   ("join of two tables", PLAIN_READS["plain_join"])]},
        }, reps)
        figures = engine_totals(metrics, CONNECT_FIGURES)
        locking.close()
        for session in (*bares, cs):
            session.stop()
    finally:
        server.stop()
        hosted.stdin.close()
        submitted.terminate()
        for proc in (hosted, submitted):
            proc.wait(timeout=60)
    text = markdown("Spark Connect (zklock's server against a bare one started by spark-submit"
                    " and a bare one hosted as zklock's is, in a PySpark process; each a local"
                    " application):", ["Spark's server", "hosted bare", "zklock's server"],
                    rows)
    return text + (
        f"\n\nzklock's Connect server's engine over the whole run (zklock's source in"
        f" Spark's metrics system): {figures.get('statementsLocked', 0):.0f} statements"
        f" locked; the grant (lockWait: the call to the server's lock client and its answer)"
        f" {figures.get('lockWaitMedianMs', 0):.2f} ms median over"
        f" {figures.get('lockWait', 0):.0f}; a command's end on its path"
        f" {figures.get('statementEndMedianMs', 0):.2f} ms median over"
        f" {figures.get('statementEnd', 0):.0f}"
        f" ({figures.get('releasesAfterReturn', 0):.0f} released after they returned); a"
        f" fresh listing {figures.get('fileListingMedianMs', 0):.2f} ms median over"
        f" {figures.get('fileListing', 0):.0f}.")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40, help="runs per contender and statement")
    ap.add_argument("--out", help="append the Markdown tables to this file")
    ap.add_argument("--classic", action=argparse.BooleanOptionalAction, default=True,
                    help="measure classic local applications")
    ap.add_argument("--connect", action=argparse.BooleanOptionalAction, default=True,
                    help="also measure Spark Connect servers")
    ap.add_argument("--before", type=Path,
                    help="a checkout of zklock at another commit: its application too, classic")
    ap.add_argument("--serve", choices=("bare", "zklock"), help=argparse.SUPPRESS)
    ap.add_argument("--serve-connect", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--warehouse", help=argparse.SUPPRESS)
    ap.add_argument("--hosts", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve(args.serve, args.hosts)
    if args.serve_connect:
        return serve_connect(args.serve_connect, args.warehouse)

    # ZooKeeper's default container sweep (60 s), as a production server has
    hosts, server = start_zookeeper(container_check_ms=60000)
    try:
        tables = [f"One ZooKeeper write round trip in this run: {write_round_trip(hosts):.2f}"
                  " ms (median of 200 sets)."]
        if args.classic:
            tables.append(classic_tables(hosts, args.reps, args.before))
        if args.connect:
            tables.append(connect_tables(hosts, args.reps))
    finally:
        if server is not None:
            server.stop()
    report("\n\n".join(tables), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
