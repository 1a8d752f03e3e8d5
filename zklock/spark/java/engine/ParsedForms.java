// The parsed form of every statement, kept on its analyzed plan: zklock's lock rules read a
// statement as it was written (LockPlanner.java), while Spark's planner strategy and the
// guard see it analyzed. Two analyzer rules, injected by EngineLocks.java, do it: the first,
// run as early as the Spark line allows (before Spark resolves anything from 4.0 on; see
// AnalyzerHooks under adapters/), remembers the plan each analysis starts from (by AnalysisContext: a view's or subquery's
// nested analysis has its own), the second tags the resolved root with it (Spark keeps tags
// through optimization). Hive's Driver has the parsed AST in hand when it takes a
// statement's locks; Spark's extension points give zklock only plans, hence the tags.
package zklock.engine;

import java.util.IdentityHashMap;
import java.util.Map;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.analysis.AnalysisContext;
import org.apache.spark.sql.catalyst.analysis.AnalysisContext$;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.trees.TreeNodeTag;

import scala.collection.Iterator;

public final class ParsedForms {
    /** The plan an analysis started from (as parsed from Spark 4.0 on; after Spark's first
     *  resolution pass on 3.5), on the root of the command Spark analyzes from it. */
    private static final TreeNodeTag<LogicalPlan> PARSED = new TreeNodeTag<>("zklock.parsed");
    /** What {@link #parsed} answered for a command, on the command. */
    private static final TreeNodeTag<LogicalPlan> READ = new TreeNodeTag<>("zklock.read");
    /** The resolved plan, on the same root: the planner reads it instead of analyzing again. */
    private static final TreeNodeTag<LogicalPlan> ANALYZED = new TreeNodeTag<>("zklock.analyzed");

    private ParsedForms() {
    }

    /** The parsed form a plan was analyzed from: a whole SQL statement's text parsed again
     *  (StatementText: exact on every line, where the first rule's view is not), else what
     *  the first rule saw; null for a plan Spark built analyzed. */
    public static LogicalPlan parsed(SparkSession session, LogicalPlan plan) {
        scala.Option<LogicalPlan> read = plan.getTagValue(READ);
        if (read.isDefined()) {
            return read.get();  // the strategy and the guard both ask: the text is parsed once
        }
        LogicalPlan statement = StatementText.of(session, plan);
        if (statement == null) {
            scala.Option<LogicalPlan> found = plan.getTagValue(PARSED);
            statement = found.isDefined() ? found.get() : null;
        }
        if (statement != null) {
            plan.setTagValue(READ, statement);
        }
        return statement;
    }

    /** The plan as it was resolved from its parsed form; null when not known. */
    public static LogicalPlan analyzed(LogicalPlan plan) {
        scala.Option<LogicalPlan> found = plan.getTagValue(ANALYZED);
        return found.isDefined() ? found.get() : null;
    }

    /** The plans the analyses running on this thread started from, one per AnalysisContext
     *  (a view's or a subquery's analysis has a context of its own and runs inside its
     *  statement's), by identity; bounded, as a failed analysis never comes to TagParsed. */
    private static final ThreadLocal<Map<AnalysisContext, LogicalPlan>> ANALYZING =
        ThreadLocal.withInitial(IdentityHashMap::new);

    private static AnalysisContext context() {
        return AnalysisContext$.MODULE$.get();
    }

    /** Remembers the plan an analysis starts from (its first call in that analysis). */
    public static final class RememberParsed extends Rule<LogicalPlan> {
        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            Map<AnalysisContext, LogicalPlan> started = ANALYZING.get();
            if (started.size() > 64) {
                started.clear();  // left by analyses that failed
            }
            started.putIfAbsent(context(), plan);
            return plan;
        }
    }

    /** Tags a resolved command with the plan its analysis started from. */
    public static final class TagParsed extends Rule<LogicalPlan> {
        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            LogicalPlan parsed = ANALYZING.get().remove(context());
            if (LockedCommands.isStatement(plan) && parsed != null
                    && plan.getTagValue(PARSED).isEmpty()) {
                plan.setTagValue(PARSED, parsed);
                plan.setTagValue(ANALYZED, plan);
                if (!(plan instanceof Command)) {
                    tagCommands(plan, parsed, plan);
                }
            }
            return plan;
        }

        /** The commands inside a statement that is not one (a multi-insert's inserts) carry
         *  the whole statement: where Spark executes them one by one (Spark 3.5), each is
         *  planned, and locked, as the whole statement. */
        private static void tagCommands(LogicalPlan plan, LogicalPlan parsed,
                                        LogicalPlan analyzed) {
            Iterator<LogicalPlan> kids = plan.children().iterator();
            while (kids.hasNext()) {
                LogicalPlan kid = kids.next();
                if (kid instanceof Command) {
                    if (kid.getTagValue(PARSED).isEmpty()) {
                        kid.setTagValue(PARSED, parsed);
                        kid.setTagValue(ANALYZED, analyzed);
                    }
                } else {
                    tagCommands(kid, parsed, analyzed);
                }
            }
        }
    }
}
