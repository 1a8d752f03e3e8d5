// DataFrameWriter.saveAsTable from Spark 4.1 on: its own command, SaveAsV1TableCommand, which
// drops and re-creates an overwritten table inside the command (so the engine locks the drop).
// An adapter: zklock/spark/jvm.py compiles the newest copy not newer than the installed Spark.
package zklock.adapters;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.command.SaveAsV1TableCommand;

import zklock.planner.SavedTable;

public final class SaveAsTable {
    /** Does saveAsTable drop an overwritten table before it runs any command? Not any more. */
    public static final boolean DROPS_FIRST = false;

    private SaveAsTable() {
    }

    /** saveAsTable's own command; null for any other plan. */
    public static SavedTable command(LogicalPlan parsed) {
        if (!(parsed instanceof SaveAsV1TableCommand)) {
            return null;
        }
        SaveAsV1TableCommand save = (SaveAsV1TableCommand) parsed;
        return new SavedTable(save.tableDesc(), save.query());
    }
}
