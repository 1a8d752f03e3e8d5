// The root of every query that zklock's engine locks (LockedCommands.java plans it): S on
// what the query reads, planned from its analyzed plan, taken before any of its jobs runs
// and held while they run.
//
// It is a V2CommandExec, as LockedCommandExec is: Spark's InsertAdaptiveSparkPlan keeps such
// a node at the root and plans adaptive execution under it, so the locks are granted before
// the first stage is materialised. Unlike Spark's commands it keeps no result: each call
// (a second collect() of the same DataFrame too) takes its locks again and runs the child.
//  - executeCollect, executeTake, executeTail: the locks are held for the call;
//  - executeToIterator: until the iterator is exhausted (toLocalIterator);
//  - doExecute (an RDD handed to the caller, whose jobs run later): until the SQL execution
//    ends (ExecutionEnds.java). Outside a running SQL execution (df.rdd) the engine cannot
//    bound the lifetime: it says so once per table set and takes nothing.
// Inside a locked statement (a LockingSession's, or a command's), nothing more is taken.
package zklock;

import org.apache.spark.SparkContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.SQLExecution$;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.datasources.v2.V2CommandExec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public final class LockedQueryExec extends V2CommandExec {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(LockedQueryExec.class);

    /** The query as Spark optimised it: which execution this node is the root of, and what
     *  to plan from when that execution's analysed plan cannot be found. */
    private final transient LogicalPlan query;
    private final SparkPlan child;
    /** The query's output, as the Scala 2.13 collection Spark 4 expects (and Spark 3.5's
     *  Scala 2.12 accepts): copied once. */
    private final scala.collection.immutable.Seq<Attribute> output;

    public LockedQueryExec(LogicalPlan query, SparkPlan child) {
        this.query = query;
        this.child = child;
        this.output = child.output().toList();
    }

    @Override
    public scala.collection.immutable.Seq<InternalRow> run() {
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

    /** Run {@code rows} holding the query's locks for the call; as LockedCommandExec does, a
     *  failure caused by losing them is reported as the loss. */
    private InternalRow[] locked(java.util.function.Supplier<InternalRow[]> rows) {
        EngineGuard guard = enter();
        InternalRow[] out;
        try {
            out = rows.get();
        } catch (Throwable e) {
            EngineRefusal lost;
            try {
                lost = guard.exit("a query", e);
            } catch (RuntimeException releaseFailed) {
                e.addSuppressed(releaseFailed);
                throw LockedQueryExec.<RuntimeException>rethrow(e);
            }
            throw lost != null ? lost : LockedQueryExec.<RuntimeException>rethrow(e);
        }
        EngineRefusal lost = guard.exit("a query", null);
        if (lost != null) {
            throw lost;
        }
        return out;
    }

    @Override
    public scala.collection.Iterator<InternalRow> executeToIterator() {
        EngineGuard guard = enter();
        scala.collection.Iterator<InternalRow> rows;
        try {
            rows = child.executeToIterator();
        } catch (Throwable e) {
            guard.exit("a query", e);
            throw LockedQueryExec.<RuntimeException>rethrow(e);
        }
        if (!guard.holds()) {
            return rows;
        }
        guard.detach();  // the caller iterates later, on other threads too
        return new HeldIterator(rows, guard);
    }

    @Override
    public RDD<InternalRow> doExecute() {
        SparkContext sc = sparkContext();
        Long execution = ExecutionEnds.running(sc);
        if (execution == null && !insideLockedStatement(sc)) {
            unbounded();
            return child.execute();
        }
        EngineGuard guard = enter();
        RDD<InternalRow> rdd;
        try {
            rdd = child.execute();
        } catch (Throwable e) {
            guard.exit("a query", e);
            throw LockedQueryExec.<RuntimeException>rethrow(e);
        }
        if (guard.holds()) {
            guard.detach();
            ExecutionEnds.releaseAtEnd(sc, execution, guard);
        }
        return rdd;
    }

    /** The locks of this query, from the analysed plan of the execution it is the root of;
     *  once they are granted, the files of what it reads are listed again (FreshListings). */
    private EngineGuard enter() {
        LogicalPlan analyzed = analyzed();
        EngineGuard guard = EngineGuard.enterQuery(session(), analyzed);
        if (guard.holds()) {
            FreshListings.refresh(analyzed, query);
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
                    && ((LockedQueryExec) qe.executedPlan()).query == query) {
                return qe.analyzed();
            }
        }
        return query;
    }

    private static boolean insideLockedStatement(SparkContext sc) {
        String nodes = sc.getLocalProperty(CommitFence.NODES);
        return nodes != null && !nodes.isEmpty();
    }

    /** An RDD whose jobs run outside any SQL execution (df.rdd): no lifetime to hold locks
     *  for. Said once per table set; LockingSession.holding(df) locks it. */
    private void unbounded() {
        try {
            String what = EngineGuard.describeReads(session(), analyzed());
            if (what != null) {
                EngineReads.unbounded(what);
            }
        } catch (RuntimeException e) {
            LOG.debug("zklock: could not name what an RDD reads", e);
        }
    }

    /** Rows of a query whose locks are held until the last row was read. */
    private static final class HeldIterator extends scala.collection.AbstractIterator<InternalRow> {
        private final scala.collection.Iterator<InternalRow> rows;
        private final EngineGuard guard;

        HeldIterator(scala.collection.Iterator<InternalRow> rows, EngineGuard guard) {
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
    public scala.collection.immutable.Seq<Attribute> output() {
        return output;
    }

    @Override
    public scala.collection.immutable.Seq<SparkPlan> children() {
        return LockedCommandExec.list(child);
    }

    // Spark passes the new children as a Scala 2.13 immutable IndexedSeq (Spark 4) or a 2.12
    // collection IndexedSeq (Spark 3.5): one of these two overrides Spark's method.
    public SparkPlan withNewChildrenInternal(
            scala.collection.immutable.IndexedSeq<SparkPlan> newChildren) {
        return new LockedQueryExec(query, newChildren.apply(0));
    }

    public SparkPlan withNewChildrenInternal(scala.collection.IndexedSeq<SparkPlan> newChildren) {
        return new LockedQueryExec(query, newChildren.apply(0));
    }

    @Override
    public Object productElement(int n) {
        if (n == 0) {
            return query;
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
        return other instanceof LockedQueryExec;
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException rethrow(Throwable e) throws E {
        throw (E) e;  // Spark's own exception, unchanged
    }
}
