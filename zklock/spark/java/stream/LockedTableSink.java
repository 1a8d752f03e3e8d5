package zklock.stream;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.execution.streaming.Sink;

import zklock.adapters.Datasets;

/**
 * A streaming query's sink for a catalog table of files (Parquet, ORC, ...), in place of
 * Spark's file sink: each micro-batch is an INSERT of its rows into the table, under the
 * batch's locks (MicroBatch), committed as zklock commits any INSERT (staged per job,
 * fenced), and once (TableBatches: a batch replayed after a crash is not written again).
 *
 * <p>Spark's file sink keeps a log, {@code _spark_metadata}, of the files each batch wrote,
 * and from then on reads the table only through it: files that another writer adds (a
 * backfill, a compaction, an INSERT from Hive) are invisible. Here the table stays a plain
 * table: its files are its content, whoever wrote them, and the exactly-once record lives
 * beside them (docs/design.md, "Streams").
 */
public final class LockedTableSink implements Sink {
    private final MicroBatch batches;
    private final TableBatches table;

    LockedTableSink(MicroBatch batches, TableBatches table) {
        this.batches = batches;
        this.table = table;
    }

    @Override
    public void addBatch(long batch, Dataset<Row> data) {
        batches.run(batch, () -> table.write(batches.queryId(), batch, Datasets.batchOf(data)));
    }

    @Override
    public String toString() {
        return "zklock[" + table + "]";
    }
}
