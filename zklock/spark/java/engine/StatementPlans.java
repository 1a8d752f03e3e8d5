// What a statement needs, as the planner answers it (LockPlanner: the same planning EXPLAIN
// LOCKS shows), and how a person names it: a command planned from its parsed form (with the
// analysis Spark made of it), a query from its analysed plan. A command whose parsed form is
// unknown (Spark built it analysed) is refused: zklock cannot tell what it writes, and it
// never runs a write unlocked.
package zklock.engine;

import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Field;
import zklock.Protocol.Mode;
import zklock.planner.LockAnswer;
import zklock.planner.LockPlanner;
import zklock.planner.PlanWalker;

final class StatementPlans {
    private StatementPlans() {
    }

    /** The planner's answer for {@code command}, from its parsed form (and the analysis Spark
     *  made of it); EngineRefusal when it has none, when the planner refuses it, or when it
     *  is not planned as a command. */
    static JsonNode command(SparkSession session, LogicalPlan command) {
        LogicalPlan parsed = ParsedForms.parsed(session, command);
        String name = PlanWalker.nodeName(command);
        if (parsed == null) {
            throw EngineRefusal.refused("zklock: cannot tell what " + name + " writes (Spark"
                + " built it already analyzed), so it does not run: run it as SQL or through a"
                + " DataFrame");
        }
        LogicalPlan analyzed = ParsedForms.analyzed(command);
        LockPlanner planner = planner(session);
        JsonNode answer = answer(analyzed != null ? planner.planCommand(parsed, analyzed)
            : planner.planPlan(parsed, true));
        if (!Protocol.Kind.COMMAND.equals(answer.path(Field.KIND).asText())) {
            throw EngineRefusal.refused("zklock: " + name + " was planned as a query; it does"
                + " not run unlocked");
        }
        return answer;
    }

    /** The command's answer planned again from its parsed form, analysed anew: the catalog
     *  as it is now (the answer Spark's analysis of it gave was planned before a wait). */
    static JsonNode commandNow(SparkSession session, LogicalPlan command) {
        return answer(planner(session).planPlan(ParsedForms.parsed(session, command), true));
    }

    /** The planner's answer for a query: S on what its analyzed plan reads; EngineRefusal
     *  when the planner refuses it. */
    static JsonNode query(SparkSession session, LogicalPlan analyzed) {
        return answer(planner(session).planQuery(analyzed));
    }

    /** A planner answer, read; EngineRefusal when the planner refused. */
    static JsonNode answer(String text) {
        JsonNode answer = Documents.read(text, LockAnswer.VERSION);
        if (Protocol.Kind.REFUSED.equals(answer.path(Field.KIND).asText())) {
            throw EngineRefusal.refused("zklock: " + answer.path(Field.MESSAGE).asText());
        }
        return answer;
    }

    private static LockPlanner planner(SparkSession session) {
        return new LockPlanner(session, LockClients.unknownStatements(session));
    }

    /** The tables a query reads, as a person names them; null when it reads none. */
    static String describeReads(SparkSession session, LogicalPlan analyzed) {
        JsonNode targets = query(session, analyzed).path(Field.TARGETS);
        return targets.size() == 0 ? null : describe(targets);
    }

    /** The statement's text as its user wrote it, else its command on what it locks. */
    static String text(LogicalPlan parsed, String name, String what) {
        scala.Option<String> text = parsed.origin().sqlText();
        return text.isDefined() ? text.get() : name + " on " + what;
    }

    /** The objects {@code answer} locks in X, as a person names them; null for none. */
    static String exclusive(JsonNode answer) {
        for (JsonNode t : answer.path(Field.TARGETS)) {
            if (Mode.EXCLUSIVE.equals(t.path(Field.MODE).asText())) {
                return describe(answer.path(Field.TARGETS));
            }
        }
        return null;
    }

    /** The objects a command locks in X (else in S), as a person names them. */
    static String describe(JsonNode targets) {
        List<String> names = new ArrayList<>();
        for (String mode : new String[] {Mode.EXCLUSIVE, Mode.SHARED}) {
            for (JsonNode t : targets) {
                String name = t.path(Field.DB).asText()
                    + (t.path(Field.TABLE).isNull() ? "" : "." + t.path(Field.TABLE).asText());
                if (mode.equals(t.path(Field.MODE).asText()) && !names.contains(name)) {
                    names.add(name);
                }
            }
            if (!names.isEmpty()) {
                break;
            }
        }
        return names.size() <= 3 ? String.join(", ", names)
            : String.join(", ", names.subList(0, 3)) + " (+" + (names.size() - 3) + " more)";
    }
}
