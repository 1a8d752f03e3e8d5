// What differs in Spark 4.1 and newer from the other Spark lines: one class per Spark line
// (zklock/spark/adapters/spark-<line>/), the same methods in each, picked by
// zklock/spark/jvm.py for the installed Spark. Keep each method a few lines: the rules stay in
// the common sources.
package zklock;

import org.apache.spark.sql.catalyst.analysis.UnresolvedExecuteImmediate;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.command.SaveAsV1TableCommand;

final class SparkAdapters {
    /** SQL scripts: zklock plans them (see LockPlanner.planScript). */
    static final boolean SCRIPTS = true;
    /** Does DataFrameWriter.saveAsTable drop an overwritten table before it runs any command?
     *  Not since 4.1: SaveAsV1TableCommand drops and re-creates it. */
    static final boolean SAVE_AS_TABLE_DROPS_FIRST = false;
    /** The node name of a parsed EXECUTE IMMEDIATE. */
    static final String EXECUTE_IMMEDIATE = "UnresolvedExecuteImmediate";

    private SparkAdapters() {
    }

    /** The text an EXECUTE IMMEDIATE runs (an expression since 4.1). */
    static Expression executeImmediateText(LogicalPlan parsed) {
        return ((UnresolvedExecuteImmediate) parsed).sqlStmtStr();
    }

    /** DataFrameWriter.saveAsTable's own command (SaveAsV1TableCommand, since 4.1: it drops
     *  and re-creates an overwritten table inside the command); null for any other plan. */
    static SavedTable saveAsTable(LogicalPlan parsed) {
        if (!(parsed instanceof SaveAsV1TableCommand)) {
            return null;
        }
        SaveAsV1TableCommand save = (SaveAsV1TableCommand) parsed;
        return new SavedTable(save.tableDesc(), save.query());
    }
}
