// Releases a query's locks when its SQL execution ends, for the reads whose jobs run after
// the call that planned them: an RDD handed to its caller (Arrow's toPandas, Spark Connect's
// results, foreach, an eager checkpoint). Spark posts SparkListenerSQLExecutionEnd after the
// execution's last job; the listener bus delivers it a moment later, so the locks are held
// a little longer than the execution, never shorter.
package zklock.engine;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.sql.execution.SQLExecution$;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd;

final class ExecutionEnds extends SparkListener {
    private static final Map<SparkContext, ExecutionEnds> LISTENERS =
        Collections.synchronizedMap(new WeakHashMap<>());
    /** How many ended executions are remembered (for a registration racing the end). */
    private static final int ENDED_KEPT = 10_000;

    private final Map<Long, List<EngineGuard>> pending = new ConcurrentHashMap<>();
    private final Map<Long, Boolean> ended = Collections.synchronizedMap(
        new LinkedHashMap<Long, Boolean>() {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<Long, Boolean> eldest) {
                return size() > ENDED_KEPT;
            }
        });

    /** The SQL execution running on this thread, if it is still running; null otherwise. */
    static Long running(SparkContext sc) {
        String id = sc.getLocalProperty(SQLExecution$.MODULE$.EXECUTION_ID_KEY());
        if (id == null) {
            return null;
        }
        long execution = Long.parseLong(id);
        return SQLExecution$.MODULE$.getQueryExecution(execution) != null ? execution : null;
    }

    /** Release {@code guard}'s set once {@code execution} has ended. */
    static void releaseAtEnd(SparkContext sc, long execution, EngineGuard guard) {
        ExecutionEnds ends;
        synchronized (LISTENERS) {
            ends = LISTENERS.get(sc);
            if (ends == null) {
                ends = new ExecutionEnds();
                sc.addSparkListener(ends);
                LISTENERS.put(sc, ends);
            }
        }
        ends.pending.computeIfAbsent(execution, k -> Collections.synchronizedList(
            new ArrayList<>())).add(guard);
        // the end may have been delivered between the caller's check and this registration
        if (ends.ended.containsKey(execution)
                || SQLExecution$.MODULE$.getQueryExecution(execution) == null) {
            ends.releaseAll(execution);
        }
    }

    /** Release now the sets of {@code sc}'s executions that have ended, whose end the
     *  listener bus has not delivered yet: a statement's request calls this first, so that
     *  a client's next statement never meets the locks of the read it already has the
     *  rows of (Spark Connect sends a result's end after its execution's end is posted, and
     *  the bus may deliver that later than the client's next statement arrives). */
    static void releaseEnded(SparkContext sc) {
        ExecutionEnds ends = LISTENERS.get(sc);
        if (ends == null || ends.pending.isEmpty()) {
            return;
        }
        for (Long execution : new ArrayList<>(ends.pending.keySet())) {
            if (SQLExecution$.MODULE$.getQueryExecution(execution) == null) {
                ends.releaseAll(execution);  // its end is posted before it is forgotten
            }
        }
    }

    @Override
    public void onOtherEvent(SparkListenerEvent event) {
        if (event instanceof SparkListenerSQLExecutionEnd) {
            long execution = ((SparkListenerSQLExecutionEnd) event).executionId();
            ended.put(execution, Boolean.TRUE);
            releaseAll(execution);
        }
    }

    private void releaseAll(long execution) {
        List<EngineGuard> guards = pending.remove(execution);
        if (guards == null) {
            return;
        }
        synchronized (guards) {
            for (EngineGuard guard : guards) {
                guard.releaseDetached();
            }
        }
    }
}
