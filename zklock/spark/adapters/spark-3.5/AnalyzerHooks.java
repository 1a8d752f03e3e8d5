// Where an extension can see a plan before Spark's analyzer resolves anything. Spark 3.5 has
// no hint resolution hook (4.0 added it), and its resolution rules run after Spark's own have
// resolved the plan once (a persistent CREATE VIEW is already the CreateViewCommand a
// temporary view also becomes). So on 3.5 a command that came from SQL is read from its text:
// Spark keeps the statement's text on the plan's origin, through analysis, and parsing it again
// gives the statement as written. A command built without SQL (a DataFrameWriter's), or one
// part of a statement (each insert of a multi-insert), is read as the first resolution rule
// saw it, and is refused where that does not name what it writes. (The one analyzed command
// that is harmless or not by how it was written, CreateViewCommand, is always a whole
// statement.)
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

    /** The statement {@code plan} was analyzed from, parsed again from the text Spark keeps
     *  on its origin, when the plan is a whole SQL statement; null when it is not (built
     *  without SQL, or one part of a statement, as each insert of a multi-insert is). */
    static LogicalPlan statement(SparkSession session, LogicalPlan plan) {
        Origin origin = plan.origin();
        if (origin.sqlText().isEmpty()) {
            return null;
        }
        LogicalPlan parsed;
        try {
            parsed = session.sessionState().sqlParser().parsePlan(origin.sqlText().get());
        } catch (Exception e) {  // it parsed once, and Spark's parser is deterministic
            throw new EngineRefusal("zklock: cannot read the statement " + plan.nodeName()
                + " comes from again (" + e.getMessage() + "), so it does not run");
        }
        // the plan is that statement when it spans the same text (whitespace, comments and a
        // final ';' around it are in neither)
        boolean whole = parsed.origin().startIndex().equals(origin.startIndex())
            && parsed.origin().stopIndex().equals(origin.stopIndex());
        // Spark also gives a command built while another runs (a data source's or a UDF's
        // driver code writing) the running statement's origin: a statement that needs no
        // locks does not speak for a command of another kind
        boolean vouches = !NodeKinds.is(PlanWalker.nodeName(parsed), NodeKinds.Kind.NO_LOCKS)
            || NodeKinds.is(PlanWalker.nodeName(plan), NodeKinds.Kind.NO_LOCKS);
        return whole && vouches ? parsed : null;
    }
}
