package zklock.stream;

import java.io.InterruptedIOException;
import java.nio.channels.ClosedByInterruptException;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkException;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.streaming.WriteToStream;
import org.apache.spark.sql.streaming.StreamingQuery;

import scala.collection.Iterator;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.engine.Block;
import zklock.engine.GrantAhead;
import zklock.planner.NodeKinds;
import zklock.planner.PlanWalker;

/**
 * One streaming query's micro-batches, each a locked statement: before a batch writes, the
 * locks an INSERT of its rows would take (X on what it writes, S on the tables it reads, its
 * sources included), held until its write has committed, as a block (Block.java) whose
 * statements they must cover. Between batches the query holds nothing, so the table's other
 * writers and readers interleave with it. A batch meeting a holder waits as a statement does
 * (lock.timeout); one whose locks are lost fails the query with LockLost, its commit refused
 * by the fence, and a restart from the checkpoint writes it again; or, where
 * spark.zklock.stream.lockLost=retry and the query keeps no state, takes its locks and is
 * written again at once (the sinks write a batch once however often they are run:
 * TableBatches' record, Spark's file-sink log). A stateful query's batch is not run again
 * in the same run: its state would be updated twice.
 *
 * A batch's locks are asked for as Spark writes its offsets (OffsetLogs), ahead of its sink:
 * the grant's round trips overlap Spark's own work before the sink (its offset log, the
 * batch's input and planning), and the sink claims it (GrantAhead).
 */
final class MicroBatch {
    /** Spark's local property naming the streaming query its thread runs (StreamExecution). */
    private static final String QUERY_ID = "sql.streaming.queryId";
    /** How often a batch whose locks were lost is run again, where the setting says so. */
    static final int RETRIES = 3;
    /** The plan nodes of a query that keeps no state between batches: any other node (an
     *  aggregation, a deduplication, a join, a limit, a *WithState) may keep state. */
    private static final Set<String> STATELESS = NodeKinds.setOf("Project", "Filter",
        "SubqueryAlias", "View", "StreamingRelation", "StreamingRelationV2",
        "StreamingExecutionRelation", "StreamingDataSourceV2Relation",
        "StreamingDataSourceV2ScanRelation", "LogicalRelation", "LocalRelation", "Generate",
        "SerializeFromObject", "DeserializeToObject", "MapElements", "MapPartitions",
        "MapInPandas", "MapInArrow", "EventTimeWatermark", "Union", "Repartition",
        "RepartitionByExpression", "ResolvedHint", "Sample");

    /** The session that started the query: its lock client takes the batches' locks. */
    private final SparkSession session;
    private final List<String> answers;
    private final String name;
    private final String query;
    private final String target;
    /** Its checkpoint, where Spark writes its offsets (OffsetLogs). */
    private final String checkpoint;
    /** How often a batch whose locks were lost is run again (0: the query fails). */
    private final int retries;
    /** The grant asked for ahead of the next batch's sink, if any. */
    private final AtomicReference<Ahead> ahead = new AtomicReference<>();

    /** A batch's grant asked for ahead of its sink. */
    private static final class Ahead {
        final long batch;
        final GrantAhead grant;

        Ahead(long batch, GrantAhead grant) {
            this.batch = batch;
            this.grant = grant;
        }
    }

    /** {@code answers}: the planner's, for every batch, of the query {@code write} starts;
     *  {@code target}: what it writes, as a person names it. */
    MicroBatch(SparkSession session, List<String> answers, WriteToStream write, String target) {
        this.session = session;
        this.answers = answers;
        String named = write.name();
        this.name = named == null ? "" : named;
        this.query = this.name.isEmpty() ? "stream" : "stream " + this.name;
        this.target = target;
        this.checkpoint = write.resolvedCheckpointLocation();
        OffsetLogs.register(checkpoint, this);
        this.retries = Protocol.Choice.STREAM_LOCK_LOST_RETRY.equals(
            Block.setting(session, Protocol.STREAM_LOCK_LOST))
            && stateless(write.inputQuery()) ? RETRIES : 0;
    }

    private static boolean stateless(LogicalPlan plan) {
        if (!STATELESS.contains(PlanWalker.nodeName(plan))) {
            return false;
        }
        Iterator<LogicalPlan> kids = plan.children().iterator();
        while (kids.hasNext()) {
            if (!stateless(kids.next())) {
                return false;
            }
        }
        return true;
    }

    /** The id of the query running on this thread (stable across its restarts). */
    String queryId() {
        return session.sparkContext().getLocalProperty(QUERY_ID);
    }

    /** Batch {@code batch} is next (Spark writes its offsets on this thread, the query's):
     *  its locks asked for now, for its sink to claim. */
    void next(long batch) {
        GrantAhead grant = named(() -> Block.ahead(session, answers, statement(batch), stopped()));
        Ahead before = ahead.getAndSet(new Ahead(batch, grant));
        if (before != null) {  // (a batch that never reached its sink)
            before.grant.drop();
        }
    }

    /** The grant asked for batch {@code batch} ahead of its sink; where there is none (a
     *  batch Spark runs again from offsets already written, a batch written again), asked
     *  now, so that a stop cancels its wait as it would an ahead's. */
    private GrantAhead claim(long batch) {
        Ahead asked = ahead.getAndSet(null);
        if (asked != null && asked.batch == batch) {
            return asked.grant;
        }
        if (asked != null) {
            asked.grant.drop();
        }
        return named(() -> Block.ahead(session, answers, statement(batch), stopped()));
    }

    /** Whether the query running on this thread has been stopped: Spark marks it so before
     *  it interrupts the thread (StreamExecution.stop), and the interruption may be
     *  swallowed on the way (a wait for the batch's locks then goes on to its end). */
    private BooleanSupplier stopped() {
        String id = queryId();
        StreamingQuery running = id == null ? null : session.streams().get(id);
        return running == null ? () -> false : () -> !running.isActive();
    }

    /** What {@code batch}'s request names (the batch, its query and target). */
    private String statement(long batch) {
        return "micro-batch " + batch + " of " + query + " (id " + queryId() + ") into "
            + target;
    }

    /** {@code ask}'s grant, its request naming the query (LockRequests). */
    private <T> T named(Supplier<T> ask) {
        SparkContext sc = session.sparkContext();
        sc.setLocalProperty(Protocol.Property.STREAM, name);
        try {
            return ask.get();
        } finally {
            sc.setLocalProperty(Protocol.Property.STREAM, null);
        }
    }

    /** Run batch {@code batch}'s {@code write} under its locks (again, where its locks were
     *  lost and the query may). */
    void run(long batch, Runnable write) {
        OffsetLogs.register(checkpoint, this);
        for (int attempt = 0; ; attempt++) {
            Throwable lost = attempt(batch, write, claim(batch));
            if (lost == null) {
                return;
            }
            if (attempt >= retries) {
                throw EngineRefusal.sneaky(lost);
            }
            System.err.println("zklock: micro-batch " + batch + " of " + query + " into " + target
                + " lost its locks (" + firstLine(lost) + "); written again (" + (attempt + 1)
                + " of " + retries + ")");
        }
    }

    /** One run of the batch under its locks: null once written; the loss of its locks, where
     *  they were lost (nothing of it visible, or all of it); any other failure is thrown. */
    private Throwable attempt(long batch, Runnable write, GrantAhead asked) {
        SparkContext sc = session.sparkContext();
        Block block = named(() -> Block.hold(session, answers, statement(batch), asked));
        try {
            write.run();
        } catch (Throwable e) {  // Spark's SparkException is a checked exception to Java
            Throwable failure = block.failed(e);
            // a query stopped while its batch ran: Spark knows the interruption itself as a
            // clean stop, and no longer would behind zklock's refusal or failed write
            Throwable interruption = interruption(e, sc.getLocalProperty(JOB_GROUP));
            if (interruption != null) {
                throw EngineRefusal.sneaky(interruption);
            }
            if (lost(failure)) {
                return failure;
            }
            throw EngineRefusal.sneaky(failure);
        }
        try {
            block.close();
        } catch (Throwable e) {  // lost while it ran (EngineRefusal: checked to Java)
            if (lost(e)) {
                return e;
            }
            throw EngineRefusal.sneaky(e);
        }
        return null;
    }

    /** The local property naming a streaming query's job group (its run id), as Spark sets
     *  it on the query's thread. */
    private static final String JOB_GROUP = "spark.jobGroup.id";

    private static boolean lost(Throwable e) {
        return e instanceof EngineRefusal && EngineRefusal.LOST.equals(((EngineRefusal) e).getCondition());
    }

    private static String firstLine(Throwable e) {
        String message = String.valueOf(e.getMessage()).trim();
        return message.split("\n", 2)[0];
    }

    /** The interruption that ended the batch's write (its query stopped), by Spark's own
     *  test (StreamExecution.isInterruptionException): an InterruptedException or an
     *  interrupted channel or stream, {@code e} or its cause, or the cancellation of the
     *  query's job group {@code group} (stop() cancels its running jobs: which reaches the
     *  batch first, the thread's interruption or the job's cancellation, is a race); null
     *  when it was not interrupted. */
    private static Throwable interruption(Throwable e, String group) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof InterruptedException
                    || t instanceof ClosedByInterruptException
                    || t instanceof InterruptedIOException) {
                return t;
            }
            String message = String.valueOf(t.getMessage());
            if (t instanceof SparkException && group != null && message.contains("cancelled")
                    && message.contains(group)) {
                return t;
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return null;
    }
}
