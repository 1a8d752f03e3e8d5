// The root of every query that zklock's engine locks (LockedCommands.java plans it): S on
// what the query reads, planned from its analyzed plan, taken before any of its jobs runs
// and held while they run.
//
// It is a V2CommandExec, as LockedCommandExec is (LockedExec.java): the locks are granted
// before the first stage is materialised. Unlike Spark's commands it keeps no result: each
// call (a second collect() of the same DataFrame too) takes its locks again and runs the child.
//  - executeCollect, executeTake, executeTail: the locks are held for the call;
//  - executeToIterator: until the iterator is exhausted (toLocalIterator);
//  - doExecute (an RDD handed to the caller, whose jobs run later): until the SQL execution
//    ends (ExecutionEnds.java). Outside a running SQL execution (df.rdd) the engine cannot
//    bound the lifetime: it says so once per table set and takes nothing.
// Inside a locked statement (a LockingSession's, or a command's), nothing more is taken.
package zklock.engine;

import java.util.function.Supplier;

import org.apache.spark.SparkContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.SQLExecution$;
import org.apache.spark.sql.execution.SparkPlan;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;

import zklock.EngineRefusal;

public final class LockedQueryExec extends LockedExec {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(LockedQueryExec.class);

    /** {@code query}: the query as Spark optimised it, which tells which execution this node
     *  is the root of, and what to plan from when that execution's analysed plan is not
     *  found. */
    public LockedQueryExec(LogicalPlan query, SparkPlan child) {
        super(query, child, child.output());
    }

    @Override
    public Seq<InternalRow> run() {
        throw new IllegalStateException("zklock: a locked query has no command result");
    }

    @Override
    public InternalRow[] executeCollect() {
        return locked(child::executeCollect);
    }

    @Override
    public InternalRow[] executeTake(int n) {
        return locked(() -> child.executeTake(n));
    }

    @Override
    public InternalRow[] executeTail(int n) {
        return locked(() -> child.executeTail(n));
    }

    private InternalRow[] locked(Supplier<InternalRow[]> rows) {
        return underGuard(enter(), "a query", rows);
    }

    @Override
    public Iterator<InternalRow> executeToIterator() {
        EngineGuard guard = enter();
        Iterator<InternalRow> rows = detached(guard, child::executeToIterator);
        return guard.holds() ? new HeldIterator(rows, guard) : rows;
    }

    @Override
    public RDD<InternalRow> doExecute() {
        SparkContext sc = sparkContext();
        Long execution = ExecutionEnds.running(sc);
        if (execution == null && !EnclosingLocks.inside(sc)) {
            unbounded();
            return child.execute();
        }
        EngineGuard guard = enter();
        RDD<InternalRow> rdd = detached(guard, child::execute);
        if (guard.holds()) {
            ExecutionEnds.releaseAtEnd(sc, execution, guard);
        }
        return rdd;
    }

    /** Start {@code work}, whose rows are read after this call returns (on other threads
     *  too): a failure releases the locks at once; otherwise the guard is detached, to be
     *  released when the rows are (the iterator's end, the SQL execution's end). */
    private <T> T detached(EngineGuard guard, Supplier<T> work) {
        T out;
        try {
            out = work.get();
        } catch (Throwable e) {
            guard.exit("a query", e);
            report(guard, true);
            throw EngineRefusal.<RuntimeException>sneaky(e);
        }
        guard.detach();
        report(guard, false);  // its release comes after this node's last word
        return out;
    }

    /** The locks of this query, from the analysed plan of the execution it is the root of;
     *  once they are granted (here, or by the client that runs it: a Spark Connect
     *  LockingSession, a block zklock's Python holds), the files of what it reads are listed
     *  again (FreshListings). */
    private EngineGuard enter() {
        LogicalPlan analyzed = analyzed();
        EngineGuard guard = noted(EngineEntry.enterQuery(session(), analyzed));
        if (guard.holds() || EnclosingLocks.inClientBlock(sparkContext())) {
            LockMetricsSource.of(sparkContext()).listings(
                FreshListings.refresh(guard, analyzed, plan));
        }
        return guard;
    }

    /** The analysed plan of the SQL execution whose root this is (views, CTEs and subqueries
     *  as written); else the optimised plan Spark planned this node from. */
    private LogicalPlan analyzed() {
        Long execution = ExecutionEnds.running(sparkContext());
        if (execution != null) {
            QueryExecution qe = SQLExecution$.MODULE$.getQueryExecution(execution);
            if (qe != null && qe.executedPlan() instanceof LockedQueryExec
                    && ((LockedQueryExec) qe.executedPlan()).plan == plan) {
                return qe.analyzed();
            }
        }
        return plan;
    }

    /** An RDD whose jobs run outside any SQL execution (df.rdd): no lifetime to hold locks
     *  for. Said once per table set; LockingSession.holding(df) locks it. */
    private void unbounded() {
        try {
            String what = StatementPlans.describeReads(session(), analyzed());
            if (what != null) {
                EngineReads.unbounded(what);
            }
        } catch (RuntimeException e) {
            LOG.debug("zklock: could not name what an RDD reads", e);
        }
    }

    /** Rows of a query whose locks are held until the last row was read. */
    private static final class HeldIterator extends AbstractIterator<InternalRow> {
        private final Iterator<InternalRow> rows;
        private final EngineGuard guard;

        HeldIterator(Iterator<InternalRow> rows, EngineGuard guard) {
            this.rows = rows;
            this.guard = guard;
        }

        @Override
        public boolean hasNext() {
            boolean more;
            try {
                more = rows.hasNext();
            } catch (RuntimeException e) {
                guard.releaseDetached();
                throw e;
            }
            if (!more) {
                guard.releaseDetached();
            }
            return more;
        }

        @Override
        public InternalRow next() {
            return rows.next();
        }
    }

    @Override
    protected LockedExec withChild(SparkPlan newChild) {
        return new LockedQueryExec(plan, newChild);
    }
}
