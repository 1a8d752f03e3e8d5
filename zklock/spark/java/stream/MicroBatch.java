package zklock.stream;

import java.util.List;

import org.apache.spark.sql.SparkSession;

import zklock.EngineRefusal;
import zklock.engine.Block;

/**
 * One streaming query's micro-batches, each a locked statement: before a batch writes, the
 * locks an INSERT of its rows would take (X on what it writes, S on the tables it reads, its
 * sources included), held until its write has committed, as a block (Block.java) whose
 * statements they must cover. Between batches the query holds nothing, so the table's other
 * writers and readers interleave with it. A batch meeting a holder waits as a statement does
 * (lock.timeout); one whose locks are lost fails the query with LockLost, its commit refused
 * by the fence, and a restart from the checkpoint writes it again.
 */
final class MicroBatch {
    /** Spark's local property naming the streaming query its thread runs (StreamExecution). */
    private static final String QUERY_ID = "sql.streaming.queryId";

    /** The session that started the query: its lock client takes the batches' locks. */
    private final SparkSession session;
    private final List<String> answers;
    private final String name;
    private final String query;
    private final String target;

    /** {@code answers}: the planner's, for every batch; {@code name}: the query's name, if
     *  any; {@code target}: what it writes, as a person names it. */
    MicroBatch(SparkSession session, List<String> answers, String name, String target) {
        this.session = session;
        this.answers = answers;
        this.name = name == null ? "" : name;
        this.query = name == null || name.isEmpty() ? "stream" : "stream " + name;
        this.target = target;
    }

    /** The id of the query running on this thread (stable across its restarts). */
    String queryId() {
        return session.sparkContext().getLocalProperty(QUERY_ID);
    }

    /** Run batch {@code batch}'s {@code write} under its locks. */
    void run(long batch, Runnable write) {
        org.apache.spark.SparkContext sc = session.sparkContext();
        sc.setLocalProperty(zklock.Protocol.STREAM, name);  // its request names the query
        Block block;
        try {
            block = Block.hold(session, answers, "micro-batch " + batch + " of " + query
                + " (id " + queryId() + ") into " + target);
        } finally {
            sc.setLocalProperty(zklock.Protocol.STREAM, null);
        }
        try {
            write.run();
        } catch (Throwable e) {  // Spark's SparkException is a checked exception to Java
            Throwable failure = block.failed(e);
            // a query stopped while its batch ran: Spark knows the interruption as a clean
            // stop, and no longer would behind zklock's failed write
            throw EngineRefusal.sneaky(interrupted(e) ? e : failure);
        }
        block.close();
    }

    /** Was the batch's write interrupted (its query stopped), by Spark's own test: an
     *  InterruptedException or an interrupted channel, here or as a cause? */
    private static boolean interrupted(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof InterruptedException
                    || t instanceof java.nio.channels.ClosedByInterruptException
                    || t instanceof java.io.InterruptedIOException) {
                return true;
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return false;
    }
}
