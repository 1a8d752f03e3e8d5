// SQL scripts (BEGIN ... END) from Spark 4.1 on: zklock plans them (ScriptPlans.java).
// An adapter: zklock/spark/jvm.py compiles the newest copy not newer than the installed Spark.
package zklock.adapters;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.SingleStatement;

public final class SqlScripts {
    /** Does zklock plan scripts on this line? */
    public static final boolean SUPPORTED = true;

    private SqlScripts() {
    }

    /** The statement a script's node runs, when it is one statement; null otherwise. */
    public static LogicalPlan statement(LogicalPlan node) {
        return node instanceof SingleStatement ? ((SingleStatement) node).parsedPlan() : null;
    }
}
