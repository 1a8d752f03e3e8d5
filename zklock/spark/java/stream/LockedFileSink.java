package zklock.stream;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.execution.streaming.Sink;

/**
 * Spark's file sink, writing files at a path that is no catalog table's, with each
 * micro-batch under its locks (MicroBatch: S on the tables the query reads). Its log,
 * {@code _spark_metadata}, stays: readers of the path read through it, and it makes the
 * sink's batches exactly once, as Spark documents.
 */
public final class LockedFileSink implements Sink {
    private final MicroBatch batches;
    private final Sink spark;

    LockedFileSink(MicroBatch batches, Sink spark) {
        this.batches = batches;
        this.spark = spark;
    }

    @Override
    public void addBatch(long batch, Dataset<Row> data) {
        batches.run(batch, () -> spark.addBatch(batch, data));
    }

    @Override
    public String toString() {
        return "zklock[" + spark + "]";
    }
}
