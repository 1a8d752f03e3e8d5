package zklock.stream;

import java.io.IOException;
import java.io.UncheckedIOException;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.functions;

import zklock.commit.BatchLog;

/**
 * A writer's numbered batches into one catalog table of files, each appended once: what a
 * streaming query's batches are (LockedTableSink, its id the writer), and what a
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

    private final String table;
    private final Path location;
    private final boolean partitioned;
    private final String[] columns;

    TableBatches(CatalogTable table) {
        this.table = table.identifier().quotedString();
        this.location = new Path(table.location());
        this.partitioned = !table.partitionColumnNames().isEmpty();
        this.columns = table.schema().fieldNames();
    }

    /** Batch {@code batch} of {@code writer}: {@code rows} appended to the table, unless it
     *  holds the batch already. */
    Outcome write(String writer, long batch, Dataset<Row> rows) {
        SparkSession session = rows.sparkSession();
        try {
            BatchLog log = BatchLog.of(location, writer, session.sessionState().newHadoopConf());
            Outcome outcome;
            switch (log.state(batch)) {
                case COMMITTED:
                    return Outcome.ALREADY_WRITTEN;
                case PENDING:  // cut off while its files moved: they all move now, once
                    log.finish(batch);
                    if (partitioned) {  // the partitions it made, into the catalog
                        session.sql("ALTER TABLE " + table + " RECOVER PARTITIONS");
                    }
                    outcome = Outcome.FINISHED;
                    break;
                default:
                    log.recording(batch, () -> append(rows));
                    outcome = Outcome.WRITTEN;
            }
            log.committed(batch);
            return outcome;
        } catch (IOException e) {
            throw new UncheckedIOException("zklock: batch " + batch + " of " + writer + " into "
                + table + ": " + e.getMessage(), e);
        }
    }

    /** The rows appended to the table by column name. */
    private void append(Dataset<Row> rows) {
        Column[] byName = new Column[columns.length];
        for (int i = 0; i < columns.length; i++) {
            byName[i] = functions.col(columns[i]);
        }
        rows.select(byName).write().mode("append").insertInto(table);
    }

    @Override
    public String toString() {
        return table;
    }
}
