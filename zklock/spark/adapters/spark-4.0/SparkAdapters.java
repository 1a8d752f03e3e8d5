// What differs in Spark 4.0 from the Spark this module's common sources are written for: one
// class per Spark line (zklock/spark/adapters/spark-<line>/), the same methods in each, picked
// by zklock/spark/jvm.py for the installed Spark. Keep each method a few lines: the rules stay
// in the common sources.
package zklock;

import org.apache.spark.sql.catalyst.analysis.ExecuteImmediateQuery;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.types.StringType$;

final class SparkAdapters {
    /** SQL scripts: 4.0's are under development (spark.sql.scripting.enabled); zklock
     *  refuses them there. */
    static final boolean SCRIPTS = false;
    /** Does DataFrameWriter.saveAsTable drop an overwritten table before it runs any command
     *  (so that no engine hook sees the drop)? Spark 4.0's does. */
    static final boolean SAVE_AS_TABLE_DROPS_FIRST = true;
    /** The node name of a parsed EXECUTE IMMEDIATE. */
    static final String EXECUTE_IMMEDIATE = "ExecuteImmediateQuery";

    private SparkAdapters() {
    }

    /** The text an EXECUTE IMMEDIATE runs: 4.0 parses a literal or a session variable. */
    static Expression executeImmediateText(LogicalPlan parsed) {
        scala.util.Either<String, ?> query = ((ExecuteImmediateQuery) parsed).query();
        return query.isLeft()
            ? Literal$.MODULE$.create(query.left().get(), StringType$.MODULE$)
            : (Expression) query.right().get();
    }

    /** DataFrameWriter.saveAsTable's own command; null: 4.0 has none (it runs a CreateTable,
     *  after dropping an existing table itself when overwriting: see docs/spark.md). */
    static SavedTable saveAsTable(LogicalPlan parsed) {
        return null;
    }
}
