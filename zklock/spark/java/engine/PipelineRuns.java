// A run of a declarative pipeline (spark-pipelines run, Spark 4.1+) writes its datasets in
// steps: as the run starts, Spark's DatasetManager creates each new dataset and alters each
// existing one through the catalog API (no statement, no plan: nothing the engine sees), and
// TRUNCATEs each materialized view it refreshes (a statement); then the flows write (a
// statement per view, a stream's micro-batches per streaming table). Locked step by step, a
// reader between two steps finds a view empty (as in Spark itself), the catalog's changes
// take no lock at all, and two runs at once take their views one by one and can each hold
// one the other needs.
//
// So a run takes X on every dataset of its pipeline, all or none, before it starts (Spark
// Connect's StartRun, seen by zklock's interceptor: adapters/PipelineStarts.java), as one
// request: held for the run's Spark Connect session (SessionLocks), which spark-pipelines
// ends with the run. Every step runs under them: the catalog's changes, the TRUNCATE, the
// views' writes and the streams' batches (the session's cover). A reader waits for the run
// and reads the new views; a second run waits, holding nothing, until the first has ended.
// A TRUNCATE that a pipeline's refresh runs without its run's locks (a Spark whose Connect
// server did not load the interceptor) is refused: its run would be locked step by step.
package zklock.engine;

import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.SparkSession;

import zklock.EngineRefusal;
import zklock.Protocol.Field;
import zklock.Protocol.JvmClass;
import zklock.Protocol.Mode;
import zklock.planner.LockAnswer;
import zklock.planner.LockPlanner;

public final class PipelineRuns {
    /** The class whose code creates, alters and TRUNCATEs a pipeline's datasets as its run
     *  starts. */
    private static final String MATERIALIZER =
        "org.apache.spark.sql.pipelines.graph.DatasetManager$";

    private PipelineRuns() {
    }

    /** Take X on each of {@code datasets} (a pipeline's tables and persisted views, as Spark
     *  quotes their names), all or none, waiting as a statement does, and hold them for
     *  {@code session} until its Spark Connect session {@code clientSession} or the
     *  operation {@code operation} that runs the run ends (a dead client's run is abandoned
     *  and closed by Spark within minutes; its session lasts an hour): the run of {@code run}
     *  (how holders and waits name it). EngineRefusal (denied, refused, unavailable) where
     *  they are not taken: the run must not start. */
    public static void hold(SparkSession session, String clientSession, String operation,
                            List<String> datasets, String run) {
        if (datasets.isEmpty()) {
            return;
        }
        LockPlanner planner = new LockPlanner(session, null);
        JsonNode answer = null;
        for (String dataset : datasets) {
            JsonNode one = StatementPlans.answer(
                planner.planExplicit(dataset, null, null, Mode.EXCLUSIVE));
            answer = answer == null ? one : LockAnswer.union(answer, one);
        }
        SessionLocks.holdForRun(session, answer, run + " writing "
            + StatementPlans.describe(answer.path(Field.TARGETS))
            + " (held for the pipeline's run)", clientSession, operation);
    }

    /** The run of {@code operation} ended (its Spark Connect operation closed, or its client
     *  left while it waited): what is held for it alone is released. */
    public static void ended(String operation) {
        SessionLocks.ended(operation);
    }

    /** Refuse {@code statement}, a TRUNCATE that a pipeline's refresh runs
     *  ({@link #materializing}), where its run's locks do not cover it ({@code answer}: the
     *  TRUNCATE's own). */
    static void checkStep(SparkSession session, JsonNode answer, String statement) {
        SessionLocks.Held own = SessionLocks.held(session);
        if (own == null || !LockAnswer.covers(own.answer(), answer)) {
            throw EngineRefusal.refused("zklock: refused " + statement + ": a declarative"
                + " pipeline's run takes its datasets' locks as it starts, and this run took"
                + " none (zklock's plugin, spark.plugins=" + JvmClass.PLUGIN
                + ", must run in its Spark Connect server: docs/deploy.md)");
        }
    }

    /** Whether this thread runs a pipeline's materialization (walked for a TRUNCATE outside
     *  a locked statement only). */
    static boolean materializing() {
        for (StackTraceElement frame : Thread.currentThread().getStackTrace()) {  // (Java 8)
            if (MATERIALIZER.equals(frame.getClassName())) {
                return true;
            }
        }
        return false;
    }
}
