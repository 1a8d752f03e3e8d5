// Declarative pipelines' runs, locked as they start, from Spark 4.1 on (PipelineRuns.java):
// before 4.1 Spark has no pipelines, and nothing to register.
// An adapter: zklock/spark/jvm.py compiles the newest copy not newer than the installed Spark.
package zklock.adapters;

import org.apache.spark.SparkContext;

public final class PipelineStarts {
    private PipelineStarts() {
    }

    /** Nothing to register before Spark 4.1. */
    public static void register(SparkContext sc) {
    }
}
