// Spark 3.5: a Dataset is org.apache.spark.sql.Dataset (4.0 split it into an API and the
// classic class). An adapter (jvm.py: the newest copy not newer than the installed Spark is
// compiled).
package zklock.adapters;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

public final class Datasets {
    private Datasets() {
    }

    /** The rows of {@code plan}, analyzed in {@code session}. */
    public static Dataset<Row> of(SparkSession session, LogicalPlan plan) {
        return Dataset.ofRows(session, plan);
    }

    /** A micro-batch's rows ({@code data}, a streaming query's incremental plan) as a batch
     *  Dataset, to write as a statement writes: what Spark's foreachBatch hands its function. */
    public static Dataset<Row> batchOf(Dataset<Row> data) {
        return data.sparkSession().internalCreateDataFrame(data.queryExecution().toRdd(),
            data.schema(), false);
    }
}
