// The planner strategy of zklock's engine extension (EngineLocks.java): every command that
// may change data or metadata is planned as Spark plans it, under a LockedCommandExec that
// holds its locks while it runs. Commands that touch nothing shared (SET, SHOW, DESCRIBE,
// EXPLAIN: NodeKinds' NO_LOCKS) are left to Spark.
//
// The strategy runs first (extensions' strategies come before Spark's own) and plans the
// command itself with Spark's planner, skipping itself for that command: Spark's planLater
// would hand the same command back to it.
package zklock;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;

import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.SparkStrategy;

final class LockedCommands extends SparkStrategy {
    private static final ThreadLocal<Set<LogicalPlan>> PLANNING =
        ThreadLocal.withInitial(() -> Collections.newSetFromMap(new IdentityHashMap<>()));

    private final SparkSession session;

    LockedCommands(SparkSession session) {
        this.session = session;
    }

    @Override
    public scala.collection.immutable.Seq<SparkPlan> apply(LogicalPlan plan) {
        // what touches nothing shared is judged on the statement as written: Spark turns a
        // persistent CREATE VIEW into the same command as a temporary one
        if (!(plan instanceof Command) || PLANNING.get().contains(plan)) {
            return scala.collection.immutable.List$.MODULE$.empty();
        }
        LogicalPlan parsed = EngineLocks.parsed(session, plan);
        String name = PlanWalker.nodeName(parsed != null ? parsed : plan);
        if (NodeKinds.is(name, NodeKinds.Kind.NO_LOCKS)) {
            if (persistentView(plan)) {  // only its statement as written tells it apart
                throw new EngineRefusal("zklock: cannot tell how the view " + plan.nodeName()
                    + " creates was written, so it does not run");
            }
            return scala.collection.immutable.List$.MODULE$.empty();
        }
        PLANNING.get().add(plan);
        SparkPlan inner;
        try {
            inner = session.sessionState().planner().plan(plan).next();
        } finally {
            PLANNING.get().remove(plan);
        }
        return LockedCommandExec.list(new LockedCommandExec(plan, inner));
    }

    /** A command that creates or replaces a persistent view: Spark analyzes CREATE VIEW and
     *  CREATE TEMPORARY VIEW into one command class, which NodeKinds knows as a temporary
     *  view's. */
    private static boolean persistentView(LogicalPlan plan) {
        return plan instanceof org.apache.spark.sql.execution.command.CreateViewCommand
            && ((org.apache.spark.sql.execution.command.CreateViewCommand) plan).viewType()
                == org.apache.spark.sql.catalyst.analysis.PersistedView$.MODULE$;
    }
}
