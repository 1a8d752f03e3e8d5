package zklock.stream;

import java.io.IOException;
import java.io.UncheckedIOException;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.internal.SQLConf;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.commit.BatchLog;

/**
 * A writer's numbered batches into one catalog table of files, each appended once: what a
 * streaming query's batches are (LockedSink, its id the writer), and what a
 * foreachBatch function that names its writer gets (insertOnce). The caller holds the
 * batch's locks, X on the table: the record (BatchLog) is read and written under them.
 */
public final class TableBatches {
    /** What became of a batch. */
    public enum Outcome {
        /** Its rows were appended. */
        WRITTEN,
        /** The table held it already (a batch replayed after a crash): nothing written. */
        ALREADY_WRITTEN,
        /** Its commit had been cut off part-way: what was still staged was moved in. */
        FINISHED
    }

    private final TableIdentifier table;

    TableBatches(CatalogTable table) {
        this.table = table.identifier();
    }

    /** Refuse (EngineRefusal) a table whose batches zklock could not commit once: one whose
     *  final move is not its committers' (a Hive-format table: Hive's load moves the files),
     *  or an application whose file writes do not commit through them (another commit
     *  protocol, spark.zklock.isolateCommits=false, Hadoop's v2 algorithm, which publishes
     *  each task's files at its commit). */
    static void check(SparkSession session, CatalogTable table) {
        String name = table.identifier().unquotedString();
        String why = null;
        scala.Option<String> provider = table.provider();
        SQLConf conf = session.sessionState().conf();
        if (provider.isDefined() && provider.get().equalsIgnoreCase("hive")) {
            why = "it is a Hive-format table, whose files Hive's load moves";
        } else if (!Protocol.JvmClass.COMMIT_PROTOCOL.equals(
                conf.getConfString(Protocol.Conf.COMMIT_PROTOCOL, ""))) {
            why = "the application's file writes commit through "
                + conf.getConfString(Protocol.Conf.COMMIT_PROTOCOL, "Spark's protocol");
        } else if ("false".equals(Protocol.ISOLATE_COMMITS.check(
                conf.getConfString(Protocol.ISOLATE_COMMITS.key, null)))) {
            why = Protocol.ISOLATE_COMMITS.key + " is false";
        } else if ("2".equals(session.sessionState().newHadoopConf()
                .get("mapreduce.fileoutputcommitter.algorithm.version", "1").trim())) {
            why = "Hadoop's v2 commit algorithm publishes each task's files as it ends";
        }
        if (why != null) {
            throw EngineRefusal.refused("zklock: cannot write batches into " + name
                + " once: " + why + " (docs/spark.md, \"Streams and pipelines\")");
        }
    }

    /** Batch {@code batch} of {@code writer}: {@code rows} appended to the table, unless it
     *  holds the batch already. The table is read from the catalog again for each batch,
     *  under its X lock: its location, columns and partitioning as they are now. */
    Outcome write(String writer, long batch, Dataset<Row> rows) {
        SparkSession session = rows.sparkSession();
        CatalogTable meta = current(session);
        String name = meta.identifier().quotedString();
        try {
            BatchLog log = BatchLog.of(new Path(meta.location()), writer,
                session.sessionState().newHadoopConf());
            BatchLog.State state = log.state(batch);
            for (long cutOff : log.unfinished()) {
                finish(session, meta, log, cutOff);
            }
            Outcome outcome;
            switch (state) {
                case COMMITTED:
                    return Outcome.ALREADY_WRITTEN;
                case PENDING:  // cut off while its files moved: they all move now, once
                    finish(session, meta, log, batch);
                    outcome = Outcome.FINISHED;
                    break;
                default:
                    log.recording(batch, () -> append(rows, meta));
                    outcome = Outcome.WRITTEN;
            }
            log.committed(batch);
            return outcome;
        } catch (IOException e) {
            throw new UncheckedIOException("zklock: batch " + batch + " of " + writer + " into "
                + name + ": " + e.getMessage(), e);
        }
    }

    /** The table as the catalog has it now; Spark's error (the table dropped) as it is. */
    private CatalogTable current(SparkSession session) {
        try {
            return session.sessionState().catalog().getTableMetadata(table);
        } catch (Exception e) {  // Spark 4.x declares its NoSuchTableException, a checked one
            throw EngineRefusal.sneaky(e);
        }
    }

    /** What a cut-off batch still had staged, moved in, and its partitions into the catalog. */
    private static void finish(SparkSession session, CatalogTable meta, BatchLog log, long batch)
            throws IOException {
        log.finish(batch);
        if (!meta.partitionColumnNames().isEmpty()) {
            session.sql("ALTER TABLE " + meta.identifier().quotedString() + " RECOVER PARTITIONS");
        }
    }

    /** The rows appended to the table by column name. */
    private static void append(Dataset<Row> rows, CatalogTable meta) {
        String[] columns = meta.schema().fieldNames();
        Column[] byName = new Column[columns.length];
        for (int i = 0; i < columns.length; i++) {
            byName[i] = functions.col(columns[i]);
        }
        rows.select(byName).write().mode("append").insertInto(meta.identifier().quotedString());
    }

    @Override
    public String toString() {
        return table.unquotedString();
    }
}
