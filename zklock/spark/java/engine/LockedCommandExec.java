// A command under zklock's engine extension: runs the command's physical plan (its child) while
// holding the command's locks (EngineGuard.java). It is a V2CommandExec (LockedExec.java) so
// that Spark treats it as it treats its own commands: adaptive execution plans the child apart,
// and the command runs once, when its result is first asked for.
package zklock.engine;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.SparkPlan;

import scala.collection.immutable.List;
import scala.collection.immutable.Seq;

import zklock.planner.PlanWalker;

public final class LockedCommandExec extends LockedExec {
    private static final long serialVersionUID = 1L;

    public LockedCommandExec(LogicalPlan command, SparkPlan child) {
        super(command, child, command.output());
    }

    @Override
    public Seq<InternalRow> run() {
        EngineGuard guard = noted(EngineEntry.enter(session(), plan));
        InternalRow[] rows = underGuard(guard, PlanWalker.nodeName(plan), () -> {
            // what it reads, as of its locks
            LockMetricsSource.of(sparkContext()).listings(FreshListings.refresh(guard, plan));
            return child.executeCollect();
        });
        List<InternalRow> out =
            scala.collection.immutable.List$.MODULE$.empty();
        for (int i = rows.length - 1; i >= 0; i--) {
            out = out.$colon$colon(rows[i]);
        }
        return out;
    }

    @Override
    protected LockedExec withChild(SparkPlan newChild) {
        return new LockedCommandExec(plan, newChild);
    }
}
