package zklock.stream;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.execution.streaming.Sink;

/**
 * A streaming query's sink with each micro-batch under its locks (MicroBatch), in place of
 * the one Spark made (StreamingWrites):
 * <ul>
 * <li>into a catalog table of files (Parquet, ORC, ...), each batch an INSERT of its rows,
 * committed as zklock commits any INSERT (staged per job, fenced), and once (TableBatches).
 * Spark's file sink would keep a log, {@code _spark_metadata}, and read the table only
 * through it, so that the files another writer adds (a backfill, a compaction, an INSERT
 * from Hive) were invisible; here the table stays a plain table, its exactly-once record
 * beside its files (docs/design.md, "Streams");</li>
 * <li>into files at a path that is no catalog table's, Spark's file sink itself, its log
 * kept: the path's readers read through it, exactly once as Spark documents.</li>
 * </ul>
 */
public final class LockedSink implements Sink {
    /** What a batch writes, once its locks are held. */
    interface Write {
        void run(long batch, Dataset<Row> data);
    }

    private final MicroBatch batches;
    private final Write write;
    private final String target;

    private LockedSink(MicroBatch batches, Write write, String target) {
        this.batches = batches;
        this.write = write;
        this.target = target;
    }

    /** Each batch appended to {@code table} as an INSERT, once. */
    static LockedSink intoTable(MicroBatch batches, TableBatches table) {
        return new LockedSink(batches, (batch, data) -> table.write(batches.queryId(), batch,
            zklock.adapters.Datasets.batchOf(data)), table.toString());
    }

    /** Each batch written by Spark's own file sink {@code spark}. */
    static LockedSink intoFiles(MicroBatch batches, Sink spark) {
        return new LockedSink(batches, spark::addBatch, spark.toString());
    }

    @Override
    public void addBatch(long batch, Dataset<Row> data) {
        batches.run(batch, () -> write.run(batch, data));
    }

    @Override
    public String toString() {
        return "zklock[" + target + "]";
    }
}
