// Spark 4.0 and newer: a Dataset of a classic session is org.apache.spark.sql.classic.Dataset
// (org.apache.spark.sql.Dataset is the API that Spark Connect's Dataset shares). An adapter
// (jvm.py: the newest copy not newer than the installed Spark is compiled).
package zklock.adapters;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.Dataset;

public final class Datasets {
    private Datasets() {
    }

    /** The rows of {@code plan}, analyzed in {@code session}. */
    public static Dataset<Row> of(SparkSession session, LogicalPlan plan) {
        return Dataset.ofRows((org.apache.spark.sql.classic.SparkSession) session, plan);
    }

    /** A micro-batch's rows ({@code data}, a streaming query's incremental plan) as a batch
     *  Dataset, to write as a statement writes: what Spark's foreachBatch hands its function. */
    public static org.apache.spark.sql.Dataset<Row> batchOf(org.apache.spark.sql.Dataset<Row> data) {
        org.apache.spark.sql.classic.Dataset<Row> rows =
            (org.apache.spark.sql.classic.Dataset<Row>) data;
        return rows.sparkSession().internalCreateDataFrame(rows.queryExecution().toRdd(),
            rows.schema(), false);
    }
}
