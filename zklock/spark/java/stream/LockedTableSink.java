package zklock.stream;

import java.io.IOException;
import java.io.UncheckedIOException;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.execution.streaming.Sink;
import org.apache.spark.sql.functions;

import zklock.adapters.Datasets;
import zklock.commit.BatchLog;

/**
 * A streaming query's sink for a catalog table of files (Parquet, ORC, ...), in place of
 * Spark's file sink: each micro-batch is an INSERT of its rows into the table, under the
 * batch's locks (MicroBatch), committed as zklock commits any INSERT (staged per job,
 * fenced), and once (BatchLog: a batch replayed after a crash is not written again).
 *
 * <p>Spark's file sink keeps a log, {@code _spark_metadata}, of the files each batch wrote,
 * and from then on reads the table only through it: files that another writer adds (a
 * backfill, a compaction, an INSERT from Hive) are invisible. Here the table stays a plain
 * table: its files are its content, whoever wrote them, and the exactly-once record lives
 * beside them (docs/design.md, "Streams").
 */
public final class LockedTableSink implements Sink {
    private final MicroBatch batches;
    private final String table;
    private final Path location;
    private final boolean partitioned;
    private final String[] columns;

    LockedTableSink(MicroBatch batches, CatalogTable table) {
        this.batches = batches;
        this.table = table.identifier().quotedString();
        this.location = new Path(table.location());
        this.partitioned = !table.partitionColumnNames().isEmpty();
        this.columns = table.schema().fieldNames();
    }

    @Override
    public void addBatch(long batch, Dataset<Row> data) {
        batches.run(batch, () -> write(batch, data));
    }

    /** Batch {@code batch} into the table, unless the table holds it already. */
    private void write(long batch, Dataset<Row> data) {
        SparkSession session = data.sparkSession();
        try {
            BatchLog log = BatchLog.of(location, batches.queryId(),
                session.sessionState().newHadoopConf());
            switch (log.state(batch)) {
                case COMMITTED:
                    return;
                case PENDING:  // cut off while its files moved: they all move now, once
                    log.finish(batch);
                    if (partitioned) {  // the partitions it made, into the catalog
                        session.sql("ALTER TABLE " + table + " RECOVER PARTITIONS");
                    }
                    break;
                default:
                    log.recording(batch, () -> insert(data));
            }
            log.committed(batch);
        } catch (IOException e) {
            throw new UncheckedIOException("zklock: micro-batch " + batch + " into " + table
                + ": " + e.getMessage(), e);
        }
    }

    /** The batch's rows, appended to the table by column name. */
    private void insert(Dataset<Row> data) {
        Column[] byName = new Column[columns.length];
        for (int i = 0; i < columns.length; i++) {
            byName[i] = functions.col(columns[i]);
        }
        Datasets.batchOf(data).select(byName).write().mode("append").insertInto(table);
    }

    @Override
    public String toString() {
        return "zklock[" + table + "]";
    }
}
