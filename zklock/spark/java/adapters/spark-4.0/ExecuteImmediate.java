// EXECUTE IMMEDIATE on Spark 4.0: parsed as ExecuteImmediateQuery, whose text is a literal or
// a session variable. An adapter: zklock/spark/jvm.py compiles the newest copy not newer than
// the installed Spark.
package zklock.adapters;

import org.apache.spark.sql.catalyst.analysis.ExecuteImmediateQuery;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

import scala.util.Either;

import org.apache.spark.sql.types.StringType$;

public final class ExecuteImmediate {
    /** The node name of a parsed EXECUTE IMMEDIATE. */
    public static final String NODE = "ExecuteImmediateQuery";

    private ExecuteImmediate() {
    }

    /** The text an EXECUTE IMMEDIATE runs. */
    public static Expression text(LogicalPlan parsed) {
        Either<String, ?> query = ((ExecuteImmediateQuery) parsed).query();
        return query.isLeft()
            ? Literal$.MODULE$.create(query.left().get(), StringType$.MODULE$)
            : (Expression) query.right().get();
    }
}
