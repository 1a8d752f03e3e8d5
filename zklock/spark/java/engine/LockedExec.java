// What the two roots of zklock's engine share (LockedCommandExec.java, LockedQueryExec.java):
// a V2CommandExec over Spark's own physical plan of the statement, keeping the statement's
// logical plan to plan its locks from, the Product plumbing Spark's tree needs, and running
// the child under an EngineGuard, where a failure caused by losing the locks is reported as
// the loss.
//
// A V2CommandExec because Spark's InsertAdaptiveSparkPlan keeps such a node at the root and
// plans adaptive execution under it: the locks are granted before the first stage runs.
package zklock.engine;

import java.util.function.Supplier;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.datasources.v2.V2CommandExec;
import org.apache.spark.sql.execution.metric.SQLMetric;

import scala.collection.immutable.Map;

import zklock.EngineRefusal;

public abstract class LockedExec extends V2CommandExec {
    private static final long serialVersionUID = 1L;

    /** The statement as Spark planned it (a command, or a query's optimised plan). */
    protected final transient LogicalPlan plan;
    protected final SparkPlan child;
    /** The output, as the Scala 2.13 collection Spark 4 expects (and Spark 3.5's Scala 2.12
     *  accepts): copied once. */
    private final scala.collection.immutable.Seq<Attribute> output;
    /** Its lock figures, as SQL metrics (created on the driver when Spark first asks). */
    private transient LockFigures figures;
    /** Whom the statement waited for, once granted (WaitNote.java); "" when it did not.
     *  The node's, not the execution's: a plan run again shows the last run's note until
     *  its own grant, and two runs of one plan at once show either's. */
    private volatile String waitNote = "";

    protected LockedExec(LogicalPlan plan, SparkPlan child,
                         scala.collection.Seq<Attribute> output) {
        this.plan = plan;
        this.child = child;
        this.output = output.toList();
    }

    /** The same node over another child (Spark's rules rewrite the tree below it). */
    protected abstract LockedExec withChild(SparkPlan newChild);

    /** Run {@code work} holding {@code guard}'s locks and release them after; a failure
     *  caused by losing them (its jobs cancelled) is reported as the loss, and so is a loss
     *  found at the release of work that completed. */
    <T> T underGuard(EngineGuard guard, String statement, Supplier<T> work) {
        T out;
        Runnable undescribe = () -> { };
        try {
            undescribe = describeWait(guard);
            out = work.get();
        } catch (Throwable e) {  // Scala code throws checked exceptions (SparkException) too
            EngineRefusal lost;
            try {
                lost = guard.exit(statement, e);
            } catch (RuntimeException releaseFailed) {  // the statement's own error first
                e.addSuppressed(releaseFailed);
                throw EngineRefusal.<RuntimeException>sneaky(e);
            } finally {
                report(guard, true);
            }
            throw EngineRefusal.<RuntimeException>sneaky(lost != null ? lost : e);
        } finally {
            undescribe.run();
        }
        EngineRefusal lost;
        try {
            lost = guard.exit(statement, null);
        } finally {
            report(guard, true);
        }
        if (lost != null) {
            throw EngineRefusal.raise(lost);
        }
        return out;
    }

    /** Spark's job description, a thread's local property: the Jobs tab names each job
     *  by it, and the SQL tab an execution that starts under it. */
    private static final String JOB_DESCRIPTION = "spark.job.description";
    /** When {@code guard} waited, the statement's jobs carry whom it waited for in their
     *  description (after the user's own, if any), as its stderr line said while it waited
     *  (zklock/locks/notice.py). Returns what puts the thread's description back. */
    private Runnable describeWait(EngineGuard guard) {
        String note = guard.figures().waitedFor();
        SparkContext sc = sparkContext();
        if (note.isEmpty() || sc == null) {
            return () -> { };
        }
        String before = sc.getLocalProperty(JOB_DESCRIPTION);
        sc.setLocalProperty(JOB_DESCRIPTION, (before == null || before.isEmpty() ? ""
            : before + " | ") + "zklock waited for: " + note);
        return () -> sc.setLocalProperty(JOB_DESCRIPTION, before);
    }

    /** {@code guard}, granted: when it waited, this node's text names whom for, in Spark's
     *  SQL tab (WaitNote.java); else it names no one, and a plan run again that waited the
     *  first time, but not now, has its execution's plan posted without the old note. */
    protected EngineGuard noted(EngineGuard guard) {
        String note = guard.figures().waitedFor();  // ("" for a guard that holds nothing)
        String before = waitNote;
        waitNote = note;
        if (!note.isEmpty() || !before.isEmpty()) {
            WaitNote.post(sparkContext());
        }
        return guard;
    }

    @Override
    public String simpleString(int maxFields) {
        String note = waitNote;
        return note.isEmpty() ? super.simpleString(maxFields)
            : super.simpleString(maxFields) + " waited for: " + note;
    }

    /** The node in EXPLAIN FORMATTED, the SQL tab's plan details: Spark's, and the note. */
    @Override
    public String verboseStringWithOperatorId() {
        String note = waitNote;
        return note.isEmpty() ? super.verboseStringWithOperatorId()
            : super.verboseStringWithOperatorId() + "Waited for: " + note + "\n";
    }

    /** Post {@code guard}'s figures to this node's SQL metrics: its grant, and, once
     *  {@code released}, how long it held and whether it lost its set. A statement a block
     *  covers (a micro-batch's write, a statement of LockingSession.holding) shows the
     *  block's grant: what it waited and locked for it; the block's release is later. */
    protected void report(EngineGuard guard, boolean released) {
        EngineGuard shown = guard.holds() ? guard : EnclosingLocks.blockAround(sparkContext());
        LockFigures mine = shown == null ? null : figures();
        if (mine == null) {
            return;
        }
        mine.granted(shown);
        if (shown == guard) {  // (the application's totals count statements' own grants)
            LockMetricsSource application = LockMetricsSource.of(sparkContext());
            application.granted(guard);
            if (released) {
                mine.released(guard, guard.figures().wasLost());
                application.released(guard);
            }
        }
        mine.post(sparkContext());
    }

    private LockFigures figures() {
        if (figures == null && sparkContext() != null) {
            figures = new LockFigures(sparkContext());
        }
        return figures;
    }

    @Override
    public Map<String, SQLMetric> metrics() {
        LockFigures mine = figures();
        return mine == null ? scala.collection.immutable.Map$.MODULE$.empty() : mine.asMap();
    }

    @Override
    public scala.collection.immutable.Seq<Attribute> output() {
        return output;
    }

    @Override
    public scala.collection.immutable.Seq<SparkPlan> children() {
        return list(child);
    }

    // Spark passes the new children as a Scala 2.13 immutable IndexedSeq (Spark 4) or a 2.12
    // collection IndexedSeq (Spark 3.5): one of these two overrides Spark's method, the other
    // is never called.
    public SparkPlan withNewChildrenInternal(
            scala.collection.immutable.IndexedSeq<SparkPlan> newChildren) {
        return withChild(newChildren.apply(0));
    }

    public SparkPlan withNewChildrenInternal(scala.collection.IndexedSeq<SparkPlan> newChildren) {
        return withChild(newChildren.apply(0));
    }

    @Override
    public Object productElement(int n) {
        if (n == 0) {
            return plan;
        }
        if (n == 1) {
            return child;
        }
        throw new IndexOutOfBoundsException(String.valueOf(n));
    }

    @Override
    public int productArity() {
        return 2;
    }

    @Override
    public boolean canEqual(Object other) {
        return other != null && other.getClass() == getClass();
    }

    static <T> scala.collection.immutable.Seq<T> list(T one) {
        return scala.collection.immutable.List$.MODULE$.<T>empty().$colon$colon(one);
    }
}
