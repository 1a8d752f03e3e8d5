package zklock.stream;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.CatalogTablePartition;
import org.apache.spark.sql.execution.command.DDLUtils;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.internal.SQLConf;

import scala.collection.Iterator;

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
        FINISHED,
        /** Its commit into a Hive-format table had been cut off part-way: what it had
         *  moved in was removed, and it was written again. */
        REWRITTEN
    }

    private final TableIdentifier table;

    TableBatches(CatalogTable table) {
        this.table = table.identifier();
    }

    /** Refuse (EngineRefusal) an application whose file writes zklock could not commit
     *  once, as they do not commit through its committers (another commit protocol,
     *  spark.zklock.isolateCommits=false, Hadoop's v2 algorithm, which publishes each task's
     *  files at its commit). */
    static void check(SparkSession session, CatalogTable table) {
        String name = table.identifier().unquotedString();
        String why = null;
        SQLConf conf = session.sessionState().conf();
        if (!Protocol.JvmClass.COMMIT_PROTOCOL.equals(
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
        Path location = new Path(meta.location());
        boolean hive = DDLUtils.isHiveTable(meta);  // Hive's load, not zklock's, moves its files
        try {
            BatchLog log = BatchLog.of(location, writer, session.sessionState().newHadoopConf());
            BatchLog.State state = log.state(batch);
            for (long cutOff : log.unfinished()) {
                if (hive) {  // its writer went on without it: none of it stays
                    log.undo(cutOff, places(session, meta));
                } else {
                    finish(session, meta, log, cutOff);
                }
            }
            Outcome outcome;
            if (state == BatchLog.State.COMMITTED) {
                return Outcome.ALREADY_WRITTEN;
            } else if (state == BatchLog.State.PENDING && !hive) {
                finish(session, meta, log, batch);  // cut off while its files moved: all now
                outcome = Outcome.FINISHED;
            } else {
                boolean undone = state == BatchLog.State.PENDING
                    && log.undo(batch, places(session, meta));
                write(session, log, batch, rows, meta, hive);
                outcome = undone ? Outcome.REWRITTEN : Outcome.WRITTEN;
            }
            log.committed(batch);
            return outcome;
        } catch (IOException e) {
            throw new UncheckedIOException("zklock: batch " + batch + " of " + writer + " into "
                + name + ": " + e.getMessage(), e);
        }
    }

    /** The batch's rows appended, its job commit recorded; a failed write into a Hive-format
     *  table undone at once (what Hive's load moved in removed), so that a batch that raised
     *  leaves none of its rows, and again by the batch's next run (a move Hive made after
     *  the failure). A failed write into another table keeps what it staged for the next
     *  run to finish (BatchLog.finish). */
    private static void write(SparkSession session, BatchLog log, long batch, Dataset<Row> rows,
                              CatalogTable meta, boolean hive) {
        try {
            log.recording(batch, hive, () -> append(rows, meta));
        } catch (Throwable e) {  // Spark's SparkException is a checked exception to Java
            if (hive) {
                try {
                    log.undo(batch, places(session, meta));
                } catch (IOException | RuntimeException undoFailed) {  // the next run undoes
                    e.addSuppressed(undoFailed);
                }
            }
            throw EngineRefusal.sneaky(e);
        }
    }

    /** Where a Hive-format table's files are: its directory, and the locations of its
     *  partitions outside it (ADD PARTITION ... LOCATION), as the catalog has them now. */
    private static List<Path> places(SparkSession session, CatalogTable meta) {
        Path location = new Path(meta.location());
        List<Path> places = new ArrayList<>();
        places.add(location);
        if (meta.partitionColumnNames().isEmpty()) {
            return places;
        }
        String inside = location.toUri().getPath() + "/";
        Iterator<CatalogTablePartition> partitions = session.sessionState().catalog()
            .listPartitions(meta.identifier(), scala.Option.empty()).iterator();
        while (partitions.hasNext()) {
            Path at = new Path(partitions.next().location());
            if (!at.toUri().getPath().startsWith(inside)) {
                places.add(at);
            }
        }
        return places;
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
