// EXECUTE IMMEDIATE on Spark 3.5: there is none (it came with 4.0), so the planner never meets
// one. An adapter: zklock/spark/jvm.py compiles the newest copy not newer than the installed
// Spark.
package zklock.adapters;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

public final class ExecuteImmediate {
    /** The node name of a parsed EXECUTE IMMEDIATE: none on this line. */
    public static final String NODE = "";

    private ExecuteImmediate() {
    }

    /** The text an EXECUTE IMMEDIATE runs: never asked on this line. */
    public static Expression text(LogicalPlan parsed) {
        throw new IllegalStateException("Spark 3.5 has no EXECUTE IMMEDIATE");
    }
}
