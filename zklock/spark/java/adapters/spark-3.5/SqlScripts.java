// SQL scripts (BEGIN ... END) before Spark 4.1: 3.5 has none, and 4.0's are under development
// (spark.sql.scripting.enabled), so zklock refuses them. An adapter: zklock/spark/jvm.py
// compiles the newest copy not newer than the installed Spark.
package zklock.adapters;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

public final class SqlScripts {
    /** Does zklock plan scripts on this line? */
    public static final boolean SUPPORTED = false;

    private SqlScripts() {
    }

    /** The statement a script's node runs: null, as scripts are refused before they are read. */
    public static LogicalPlan statement(LogicalPlan node) {
        return null;
    }
}
