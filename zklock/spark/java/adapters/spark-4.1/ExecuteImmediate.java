// EXECUTE IMMEDIATE from Spark 4.1 on: parsed as UnresolvedExecuteImmediate, whose text is an
// expression. An adapter: zklock/spark/jvm.py compiles the newest copy not newer than the
// installed Spark.
package zklock.adapters;

import org.apache.spark.sql.catalyst.analysis.UnresolvedExecuteImmediate;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

public final class ExecuteImmediate {
    /** The node name of a parsed EXECUTE IMMEDIATE. */
    public static final String NODE = "UnresolvedExecuteImmediate";

    private ExecuteImmediate() {
    }

    /** The text an EXECUTE IMMEDIATE runs. */
    public static Expression text(LogicalPlan parsed) {
        return ((UnresolvedExecuteImmediate) parsed).sqlStmtStr();
    }
}
