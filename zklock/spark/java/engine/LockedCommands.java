// The planner strategy of zklock's engine extension (EngineLocks.java): every command that
// may change data or metadata is planned as Spark plans it, under a LockedCommandExec that
// holds its locks while it runs. Commands that touch nothing shared (SET, SHOW, DESCRIBE,
// EXPLAIN: NodeKinds' NO_LOCKS) are left to Spark. The root of every query that reads a
// relation is planned under a LockedQueryExec (S on what it reads), unless
// spark.zklock.engine.reads=off (EngineReads.java); what is planned inside a command's or a
// query's planning (its query, its subtrees) is not wrapped again, nor are the plans that
// adaptive execution re-plans while a query runs (its locks are held already).
//
// The strategy runs first (extensions' strategies come before Spark's own) and plans the
// command itself with Spark's planner, skipping itself for that command: Spark's planLater
// would hand the same command back to it.
package zklock.engine;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.SparkStrategy;
import org.apache.spark.sql.execution.command.CreateViewCommand;

import scala.collection.Iterator;
import scala.collection.immutable.Seq;

import zklock.EngineRefusal;
import zklock.planner.NodeKinds;
import zklock.planner.PlanWalker;

public final class LockedCommands extends SparkStrategy {
    private static final ThreadLocal<Set<LogicalPlan>> PLANNING =
        ThreadLocal.withInitial(() -> Collections.newSetFromMap(new IdentityHashMap<>()));
    /** How many plans this thread is planning under a locked root: inside, none is wrapped. */
    private static final ThreadLocal<int[]> DEPTH = ThreadLocal.withInitial(() -> new int[1]);
    /** Leaves that read no table: a query of only these takes no locks. */
    private static final Set<String> READS_NOTHING = NodeKinds.setOf(
        "LocalRelation", "Range", "OneRowRelation", "CommandResult");

    private final SparkSession session;

    public LockedCommands(SparkSession session) {
        this.session = session;
    }

    @Override
    public Seq<SparkPlan> apply(LogicalPlan plan) {
        String sessionLock = SessionLockParser.statement(plan);
        if (sessionLock != null) {  // LOCK or UNLOCK TABLE: the session's own (SessionLocks)
            return LockedExec.list(new SessionLockExec(sessionLock));
        }
        // what touches nothing shared is judged on the statement as written: Spark turns a
        // persistent CREATE VIEW into the same command as a temporary one
        if (!(plan instanceof Command) && (DEPTH.get()[0] > 0 || !isStatement(plan))) {
            return rootOfQuery(plan) ? LockedExec.list(
                new LockedQueryExec(plan, planInside(plan))) : empty();
        }
        if (PLANNING.get().contains(plan)) {
            return empty();
        }
        LogicalPlan parsed = ParsedForms.parsed(session, plan);
        String name = PlanWalker.nodeName(parsed != null ? parsed : plan);
        if (NodeKinds.is(name, NodeKinds.Kind.NO_LOCKS)) {
            if (persistentView(plan)) {  // only its statement as written tells it apart
                throw EngineRefusal.refused("zklock: cannot tell how the view " + plan.nodeName()
                    + " creates was written, so it does not run");
            }
            return empty();
        }
        PLANNING.get().add(plan);
        SparkPlan inner;
        try {
            inner = planInside(plan);
        } finally {
            PLANNING.get().remove(plan);
        }
        return LockedExec.list(new LockedCommandExec(plan, inner));
    }

    /** Spark's own physical plan for {@code plan}, planned with nothing below it wrapped. */
    private SparkPlan planInside(LogicalPlan plan) {
        DEPTH.get()[0]++;
        try {
            return session.sessionState().planner().plan(plan).next();
        } finally {
            DEPTH.get()[0]--;
        }
    }

    /** Is {@code plan} a command statement: a command, or a plan holding commands (Hive's
     *  multi-insert, a Union of inserts that Spark executes as one plan)? Then it is locked
     *  whole, all or none, as a command: never as a query, which would take only its reads. */
    public static boolean isStatement(LogicalPlan plan) {
        if (plan instanceof Command) {
            return true;
        }
        if (plan.nodeName().equals("ReturnAnswer")) {
            return false;  // Spark's root of what is collected: it plans the child apart
        }
        Iterator<LogicalPlan> kids = plan.children().iterator();
        while (kids.hasNext()) {
            if (isStatement(kids.next())) {
                return true;
            }
        }
        return false;
    }

    /** Is {@code plan} the root of a query zklock locks: not inside a locked root's planning,
     *  not a command (behind Spark's ReturnAnswer), not streaming, not adaptive execution's
     *  re-planning of a running query, and reading something other than local rows? */
    private boolean rootOfQuery(LogicalPlan plan) {
        if (DEPTH.get()[0] > 0 || plan.isStreaming()) {
            return false;
        }
        LogicalPlan top = plan.nodeName().equals("ReturnAnswer") ? plan.children().apply(0)
            : plan;
        if (isStatement(top) || contains(plan, "LogicalQueryStage")
                || !readsRelation(plan)) {
            return false;
        }
        return EngineReads.locked(session);
    }

    private static boolean contains(LogicalPlan plan, String nodeName) {
        if (plan.nodeName().equals(nodeName)) {
            return true;
        }
        Iterator<LogicalPlan> kids = plan.children().iterator();
        while (kids.hasNext()) {
            if (contains(kids.next(), nodeName)) {
                return true;
            }
        }
        return false;
    }

    /** Whether a plan may read a relation: a leaf other than local rows, or a subquery. */
    private static boolean readsRelation(LogicalPlan plan) {
        if (!plan.subqueries().isEmpty()) {
            return true;
        }
        if (plan.children().isEmpty()) {
            return !READS_NOTHING.contains(plan.nodeName());
        }
        Iterator<LogicalPlan> kids = plan.children().iterator();
        while (kids.hasNext()) {
            if (readsRelation(kids.next())) {
                return true;
            }
        }
        return false;
    }

    private static Seq<SparkPlan> empty() {
        return scala.collection.immutable.List$.MODULE$.empty();
    }

    /** A command that creates or replaces a persistent view: Spark analyzes CREATE VIEW and
     *  CREATE TEMPORARY VIEW into one command class, which NodeKinds knows as a temporary
     *  view's. */
    private static boolean persistentView(LogicalPlan plan) {
        return plan instanceof CreateViewCommand
            && ((CreateViewCommand) plan).viewType()
                == org.apache.spark.sql.catalyst.analysis.PersistedView$.MODULE$;
    }
}
