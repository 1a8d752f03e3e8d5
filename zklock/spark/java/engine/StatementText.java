// A command's statement, read again from its SQL text. Spark keeps the text and span of the
// statement a plan was parsed from on the plan's origin, through analysis, and its parser is
// deterministic: parsing the text again gives the statement as written, on every Spark line.
// What an extension's first rule sees is not always that: Spark 3.5 has no hook before
// resolution, Spark 4.0's Hive-enabled session drops the one 4.0 added, and 4.0 analyses a SQL
// function's body in its statement's context, where it can take the statement's record
// (ParsedForms.parsed prefers this).
package zklock.engine;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.trees.Origin;

import zklock.EngineRefusal;
import zklock.planner.NodeKinds;
import zklock.planner.PlanWalker;

public final class StatementText {
    private StatementText() {
    }

    /** The statement {@code command} was analyzed from, parsed again from the text Spark keeps
     *  on its origin, when the command is a whole SQL statement; null when it is not (built
     *  without SQL, or one part of a statement, as each insert of a multi-insert is). */
    public static LogicalPlan of(SparkSession session, LogicalPlan command) {
        Origin origin = command.origin();
        if (origin.sqlText().isEmpty()) {
            return null;
        }
        LogicalPlan parsed;
        try {
            parsed = session.sessionState().sqlParser().parsePlan(origin.sqlText().get());
        } catch (Exception e) {  // it parsed once, and Spark's parser is deterministic
            throw EngineRefusal.refused("zklock: cannot read the statement " + command.nodeName()
                + " comes from again (" + e.getMessage() + "), so it does not run");
        }
        // the command is that statement when it spans the same text (whitespace, comments and
        // a final ';' around it are in neither)
        boolean whole = parsed.origin().startIndex().equals(origin.startIndex())
            && parsed.origin().stopIndex().equals(origin.stopIndex());
        // Spark also gives a command built while another runs (a data source's or a UDF's
        // driver code writing) the running statement's origin: a statement that needs no
        // locks does not speak for a command of another kind
        boolean vouches = !NodeKinds.is(PlanWalker.nodeName(parsed), NodeKinds.Kind.NO_LOCKS)
            || NodeKinds.is(PlanWalker.nodeName(command), NodeKinds.Kind.NO_LOCKS);
        return whole && vouches ? parsed : null;
    }
}
