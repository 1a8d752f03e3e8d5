// Where an extension can see a plan before Spark's analyzer resolves anything. Spark 3.5 has
// no hint resolution hook (4.0 added it), and its resolution rules run after Spark's own have
// resolved the plan once (a persistent CREATE VIEW is already the CreateViewCommand a
// temporary view also becomes). So on 3.5 a command that came from SQL is read from its text:
// Spark keeps the statement's text on the plan's origin, through analysis, and parsing it again
// gives the statement as written. A command built without SQL (a DataFrameWriter's) is read as
// the first resolution rule saw it, and is refused where that does not name what it writes.
// An adapter: zklock/spark/jvm.py compiles the newest copy not newer than the installed Spark.
package zklock;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.trees.Origin;

final class AnalyzerHooks {
    private AnalyzerHooks() {
    }

    /** Run {@code rule} in every analysis, as early as this Spark allows. */
    static void first(SparkSessionExtensions extensions, Rule<LogicalPlan> rule) {
        extensions.injectResolutionRule(session -> rule);
    }

    /** The statement {@code plan} was analyzed from, parsed again from its text when the plan
     *  is a whole SQL statement; null otherwise. */
    static LogicalPlan statement(SparkSession session, LogicalPlan plan) {
        Origin origin = plan.origin();
        if (origin.sqlText().isEmpty() || origin.startIndex().isEmpty()
                || origin.stopIndex().isEmpty()) {
            return null;
        }
        String text = origin.sqlText().get();
        int start = (Integer) origin.startIndex().get();
        int stop = (Integer) origin.stopIndex().get();
        if (start != 0 || stop < text.stripTrailing().length() - 1) {
            return null;  // part of a statement, not the whole
        }
        try {
            return session.sessionState().sqlParser().parsePlan(text);
        } catch (Exception e) {  // the text parsed once: Spark's parser is deterministic
            throw new EngineRefusal("zklock: cannot read the statement again (" + e.getMessage()
                + "), so it does not run");
        }
    }
}
