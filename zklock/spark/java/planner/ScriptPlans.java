// The locks of statements whose text is only known as they run: EXECUTE IMMEDIATE (its text
// evaluated first, then planned like any statement) and SQL scripts (BEGIN ... END, the union
// of every statement's locks, held for the whole script because Spark runs it in one call,
// with no hook between statements). Hive has neither; its Driver locks each statement it
// compiles.
package zklock.planner;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.trees.TreePattern$;
import org.apache.spark.sql.execution.CommandExecutionMode;

import scala.collection.Seq;

import zklock.adapters.Datasets;
import zklock.adapters.ExecuteImmediate;
import zklock.adapters.SqlScripts;
import zklock.planner.LockAnswer.Target;
import zklock.planner.NodeKinds.Kind;

final class ScriptPlans {
    private final SparkSession session;
    private final LockPlanner planner;

    ScriptPlans(SparkSession session, LockPlanner planner) {
        this.session = session;
        this.planner = planner;
    }

    /** The locks of the statement EXECUTE IMMEDIATE runs, planned like any statement. Its
     *  text may be a literal, a session variable or an expression over them: it is evaluated
     *  now. Inside a script (whose variables do not exist before it runs) only a literal can
     *  be known; anything else is refused. */
    LockPlanner.Plan executeImmediate(LogicalPlan parsed, boolean inScript) {
        Expression expr = ExecuteImmediate.text(parsed);
        String inner;
        if (expr instanceof Literal) {
            Object value = ((Literal) expr).value();
            inner = value != null ? value.toString() : null;
        } else if (inScript) {
            throw LockAnswer.unsupported("zklock cannot know the statement EXECUTE IMMEDIATE"
                + " runs inside a SQL script (" + expr.sql() + ") before the script runs; use a"
                + " string literal");
        } else if (expr.containsPattern(TreePattern$.MODULE$.PLAN_EXPRESSION())) {
            throw LockAnswer.unsupported("zklock evaluates EXECUTE IMMEDIATE's text before"
                + " running it, and this text reads tables (a subquery); use a literal or a"
                + " session variable");
        } else {
            inner = evaluateText(expr.sql());
        }
        if (inner == null) {
            throw LockAnswer.unsupported("EXECUTE IMMEDIATE of a NULL statement text");
        }
        LockPlanner.Plan sub = planner.planParsed(planner.parse(inner), false, null);
        List<String> notes = new ArrayList<>(sub.notes);
        notes.add("EXECUTE IMMEDIATE runs: " + (inner.length() > 200
            ? inner.substring(0, 200) : inner));
        return LockPlanner.Plan.command(sub.targets, notes);
    }

    /** A SQL script: the union of every statement's locks, plus S on every table it names. */
    LockPlanner.Plan script(LogicalPlan parsed) {
        if (!SqlScripts.SUPPORTED) {
            throw LockAnswer.unsupported("zklock locks SQL scripts from Spark 4.1 on (4.0's are"
                + " under development); the script was not run");
        }
        List<PlanWalker.Node> census = PlanWalker.census(parsed);
        for (PlanWalker.Node n : census) {
            if (NodeKinds.is(n.name, Kind.REFUSED)) {
                throw LockAnswer.unsupported("zklock does not lock " + n.name + "; the script"
                    + " was not run");
            }
        }
        List<LogicalPlan> stmts = new ArrayList<>();
        statements(parsed, stmts);
        List<Target> specs = new ArrayList<>();
        TreeSet<String> notes = new TreeSet<>();
        for (LogicalPlan stmt : stmts) {
            String sname = PlanWalker.nodeName(stmt);
            if (sname.equals("CompoundBody")) {
                continue;  // its statements are listed on their own
            }
            LockPlanner.Plan sub = sname.equals(ExecuteImmediate.NODE)
                ? executeImmediate(stmt, true) : planner.planParsed(stmt, false, null);
            specs.addAll(sub.targets);
            notes.addAll(sub.notes);
        }
        specs.addAll(planner.namedReads(census));
        LockPlanner.Plan plan = LockPlanner.Plan.command(specs, new ArrayList<>(notes));
        plan.whole = true;
        return plan;
    }

    private String evaluateText(String exprSql) {
        LogicalPlan plan;
        try {
            plan = planner.parse("SELECT CAST((" + exprSql + ") AS STRING)");
        } catch (Exception e) {
            throw LockAnswer.unsupported("zklock cannot evaluate the text of EXECUTE IMMEDIATE ("
                + exprSql + "): " + LockAnswer.firstLine(e));
        }
        for (PlanWalker.Node n : PlanWalker.census(plan)) {
            if (NodeKinds.kindOf(n.name) != Kind.QUERY
                    || (n.parts != null && !n.parts.isEmpty())) {
                throw LockAnswer.unsupported("zklock evaluates EXECUTE IMMEDIATE's text before"
                    + " running it, and (" + exprSql + ") reads tables; use a literal or a"
                    + " session variable");
            }
        }
        try {
            LogicalPlan analyzed = session.sessionState()
                .executePlan(plan, CommandExecutionMode.SKIP()).analyzed();
            List<Row> rows =
                Datasets.of(session, analyzed).collectAsList();
            Object value = rows.get(0).get(0);
            return value == null ? null : value.toString();
        } catch (Exception e) {
            throw LockAnswer.unsupported("zklock cannot evaluate the text of EXECUTE IMMEDIATE ("
                + exprSql + "): " + LockAnswer.firstLine(e));
        }
    }

    private static void statements(LogicalPlan plan, List<LogicalPlan> out) {
        LogicalPlan statement = SqlScripts.statement(plan);
        if (statement != null) {
            out.add(statement);
            return;
        }
        Seq<LogicalPlan> kids = plan.children();
        for (int i = 0; i < kids.size(); i++) {
            statements(kids.apply(i), out);
        }
    }
}
