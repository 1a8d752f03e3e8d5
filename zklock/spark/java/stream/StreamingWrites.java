// Streaming writes into tables and files, each micro-batch a locked statement. An analyzer
// rule: it runs when DataStreamWriter.start() or toTable() analyses the query, before the
// query's first batch, and replaces the sink Spark made:
//  - into a catalog table of files (toTable), Spark's file sink by LockedSink: each
//    batch an INSERT into the table, once, with no _spark_metadata log to hide the files
//    other writers add;
//  - into files at a path no catalog table is stored at, Spark's file sink kept (its log
//    too), each batch under its locks (LockedSink too).
// Refused in one line, as before it starts: a table whose directory holds a file-sink log
// with entries (written by a stream without zklock: readers see only what it names), files
// at a catalog table's path, and writes into tables zklock cannot commit (DataSource V2
// tables, a table whose sink is not a file sink). Spark's file sink makes its log when it is
// made, before this rule runs, unless zklock's checkpoint manager (adapters/LazySinkLogs.java,
// the engine's default) defers it to its first entry; where an application names another
// manager, or an earlier zklock left one, the rule removes an empty log where the table's
// sink replaces it or the start is refused, so that a refused start leaves nothing. Other
// sinks run as they are: foreachBatch's batches write through the engine like any statement,
// and console, memory, Kafka and the like write no table.
//
// Hive's Streaming Ingest API takes a shared lock per transaction batch, under which each
// batch commits in a transaction of its own: the same shape (docs/design.md, "Streams").
package zklock.stream;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.streaming.WriteToStream;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.execution.streaming.Sink;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.engine.Block;
import zklock.planner.LockPlanner;

public final class StreamingWrites extends Rule<LogicalPlan> {
    private final SparkSession session;

    public StreamingWrites(SparkSession session) {
        this.session = session;
    }

    /** The sinks that write no table (their own output, or a batch function whose
     *  statements the engine locks one by one), by class: they run as they are. Any other
     *  sink is refused: zklock cannot tell what it writes. */
    private static final Set<String> WRITES_NO_TABLE = new HashSet<>(
        Arrays.asList("ForeachBatchSink", "MemorySink", "ConsoleTable", "ConsoleTable$",
            "ForeachWriterTable", "NoopTable", "NoopTable$", "KafkaTable", "KafkaSink",
            "ContinuousMemorySink"));

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (!(plan instanceof WriteToStream)) {
            return plan;
        }
        WriteToStream write = (WriteToStream) plan;
        Table sink = write.sink();
        String kind = sink.getClass().getSimpleName();
        if (sink instanceof LockedSink) {
            return plan;
        }
        boolean fileSink = kind.equals("FileStreamSink");
        if (fileSink && write.catalogTable().isDefined()) {
            return withSink(write, intoTable(write, write.catalogTable().get()));
        }
        if (fileSink) {
            return withSink(write, intoFiles(write, (Sink) sink));
        }
        if (write.catalogTable().isDefined() || write.catalogAndIdent().isDefined()
                || !WRITES_NO_TABLE.contains(kind)) {
            throw EngineRefusal.refused("zklock: refused a streaming write to "
                + target(write, sink.name()) + " (" + sink.getClass().getName() + "): zklock"
                + " commits streaming writes into catalog tables of files (Parquet, ORC, ...)"
                + " and files at a path; write in batches (foreachBatch is locked like any"
                + " statement)");
        }
        return plan;
    }

    /** The sink of a stream into {@code table}: its batches inserted, once, under locks. */
    private Sink intoTable(WriteToStream write, CatalogTable table) {
        String name = table.identifier().database().get() + "." + table.identifier().table();
        Path log = new Path(new Path(table.location()), SinkLogDir.NAME);
        try {
            int entries = removeIfEmpty(log);
            if (entries > 0) {
                throw EngineRefusal.refused("zklock: refused a streaming write to " + name
                    + ": its directory holds a file-sink log (" + log + ", " + entries
                    + " entries) of a stream run without zklock, through which Spark reads the"
                    + " table, hiding every file another writer adds; check the table's files,"
                    + " then move the log away (docs/spark.md, \"Streams and pipelines\")");
            }
            TableBatches.check(session, table);
            LockPlanner planner = new LockPlanner(session, null);
            List<String> answers = Arrays.asList(
                planner.planWrite(table.identifier().quotedString(), null),
                planner.planQuery(write.inputQuery()));
            Block.check(answers);
            return LockedSink.intoTable(new MicroBatch(session, answers, write, name),
                new TableBatches(table));
        } catch (Throwable refused) {  // EngineRefusal is a checked exception to Java
            removeIfEmpty(log);  // a refused start leaves nothing
            throw EngineRefusal.sneaky(refused);
        }
    }

    /** The sink of a stream into files at a path: Spark's, each batch under locks. */
    private Sink intoFiles(WriteToStream write, Sink spark) {
        String text = spark.toString();  // FileSink[<path>], on every Spark line
        if (!text.startsWith("FileSink[") || !text.endsWith("]")) {
            throw EngineRefusal.refused("zklock: refused a streaming write to " + text
                + ": zklock cannot tell the path Spark's file sink writes");
        }
        String path = text.substring("FileSink[".length(), text.length() - 1);
        try {
            LockPlanner planner = new LockPlanner(session, null);
            String tables = Block.objects(planner.planPaths(Collections.singletonList(path)));
            if (!tables.isEmpty()) {
                throw EngineRefusal.refused("zklock: refused a streaming write to files at "
                    + path + ": a catalog table is stored there (" + tables + "); stream into"
                    + " the table by name (toTable), which zklock commits whole and once");
            }
            String manager = session.sessionState().newHadoopConf()
                .get(Protocol.Conf.CHECKPOINT_MANAGER);
            if (!Protocol.JvmClass.CHECKPOINT_MANAGER.equals(manager)) {
                throw EngineRefusal.refused("zklock: refused a streaming write to files at "
                    + path + ": its batches commit by entries of Spark's log, which zklock's"
                    + " checkpoint manager fences, and this application names " + manager
                    + " (" + Protocol.Conf.CHECKPOINT_MANAGER + "; zklock's plugin names "
                    + Protocol.JvmClass.CHECKPOINT_MANAGER + ")");
            }
            List<String> answers =
                Collections.singletonList(planner.planQuery(write.inputQuery()));
            Block.check(answers);
            return LockedSink.intoFiles(new MicroBatch(session, answers, write, path), spark);
        } catch (Throwable refused) {  // EngineRefusal is a checked exception to Java
            removeIfEmpty(new Path(path, SinkLogDir.NAME));  // a refused start leaves nothing
            throw EngineRefusal.sneaky(refused);
        }
    }

    /** {@code write} with {@code sink} in place of Spark's. */
    private static LogicalPlan withSink(WriteToStream write, Sink sink) {
        Object[] args = new Object[write.productArity()];
        for (int i = 0; i < args.length; i++) {
            Object arg = write.productElement(i);
            args[i] = arg == write.sink() ? sink : arg;
        }
        return write.makeCopy(args);
    }

    /** Remove Spark's file-sink log at {@code log} if it holds nothing (made by the sink
     *  Spark built for this start, or left by a refused start of an earlier zklock); how
     *  many entries it holds (0 once removed, or when there was none). */
    private int removeIfEmpty(Path log) {
        try {
            FileSystem fs = log.getFileSystem(session.sessionState().newHadoopConf());
            if (!fs.exists(log)) {
                return 0;
            }
            FileStatus[] entries = fs.listStatus(log);
            if (entries.length == 0) {
                fs.delete(log, false);
            }
            return entries.length;
        } catch (IOException e) {
            throw new UncheckedIOException("zklock: cannot read " + log + ": " + e.getMessage(), e);
        }
    }

    /** The table or sink a streaming write names, for the message. */
    private static String target(WriteToStream write, String sink) {
        if (write.catalogTable().isDefined()) {
            return write.catalogTable().get().identifier().unquotedString();
        }
        return write.catalogAndIdent().isDefined()
            ? write.catalogAndIdent().get()._2().toString() : sink;
    }
}
