// DataFrameWriter.saveAsTable on Spark 3.5 and 4.0: it runs a CreateTable (the common
// planner's rule), after dropping an existing table itself when overwriting, before any
// command that an engine hook could see (docs/spark.md). An adapter: zklock/spark/jvm.py
// compiles the newest copy not newer than the installed Spark.
package zklock.adapters;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

import zklock.planner.SavedTable;

public final class SaveAsTable {
    /** Does saveAsTable drop an overwritten table before it runs any command? Here, yes. */
    public static final boolean DROPS_FIRST = true;

    private SaveAsTable() {
    }

    /** saveAsTable's own command: null, as this line has none. */
    public static SavedTable command(LogicalPlan parsed) {
        return null;
    }
}
