// The lock figures of a locked statement, as SQL metrics of its root node (LockedExec.java):
// time waiting for the locks, attempts, objects locked in S and in X, time holding them,
// and whether they were lost. Spark's UI shows a node's SQL metrics in the SQL tab, and the
// event log keeps them (SparkListenerDriverAccumUpdates), so the History Server shows them
// too: a query that waited 11 s for a backfill no longer looks like an 11 s query.
//
// The figures come from the grant the guard already holds (EngineGuard.java): no ZooKeeper
// round trip and no py4j crossing is added. They are posted once, when the locks are
// released (or, for a query whose rows are read later, once they are granted).
package zklock.engine;

import java.util.Arrays;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.execution.metric.SQLMetrics;

import scala.collection.immutable.List;
import scala.collection.immutable.Map;

final class LockFigures {
    /** The metrics' keys in the node's map, and their names in the UI. */
    static final String WAIT = "lockWait";
    static final String ATTEMPTS = "lockAttempts";
    static final String SHARED = "locksShared";
    static final String EXCLUSIVE = "locksExclusive";
    static final String HELD = "lockHeld";
    static final String LOST = "locksLost";

    private final SQLMetric wait;
    private final SQLMetric attempts;
    private final SQLMetric shared;
    private final SQLMetric exclusive;
    private final SQLMetric held;
    private final SQLMetric lost;
    private final Map<String, SQLMetric> map;

    LockFigures(SparkContext sc) {
        wait = SQLMetrics.createTimingMetric(sc, "time waiting for locks",
            SQLMetrics.createTimingMetric$default$3());
        attempts = SQLMetrics.createMetric(sc, "lock attempts");
        shared = SQLMetrics.createMetric(sc, "objects locked in S");
        exclusive = SQLMetrics.createMetric(sc, "objects locked in X");
        held = SQLMetrics.createTimingMetric(sc, "time holding locks",
            SQLMetrics.createTimingMetric$default$3());
        lost = SQLMetrics.createMetric(sc, "lock sets lost");
        Map<String, SQLMetric> m = scala.collection.immutable.Map$.MODULE$.empty();
        String[] keys = {WAIT, ATTEMPTS, SHARED, EXCLUSIVE, HELD, LOST};
        SQLMetric[] values = {wait, attempts, shared, exclusive, held, lost};
        for (int i = 0; i < keys.length; i++) {
            m = with(m, keys[i], values[i]);
        }
        map = m;
    }

    /** {@code m} with {@code key}: Scala 2.13's updated is typed through MapOps, 2.12's is
     *  not; the result is an immutable Map in both. */
    @SuppressWarnings("unchecked")
    private static Map<String, SQLMetric> with(
            Map<String, SQLMetric> m, String key, SQLMetric value) {
        return (Map<String, SQLMetric>) (Object) m.updated(key, value);
    }

    /** The node's metrics map (SparkPlan.metrics). */
    Map<String, SQLMetric> asMap() {
        return map;
    }

    /** The guard was granted its locks (a guard that holds none adds nothing). The figures
     *  are set, not added: a plan run again (a second collect() of one DataFrame) shows its
     *  latest statement's, as each of Spark's executions of it posts its own. */
    void granted(EngineGuard guard) {
        if (!guard.holds()) {
            return;
        }
        wait.set(guard.figures().waitMillis());
        attempts.set(guard.figures().attempts());
        shared.set(guard.figures().sharedObjects());
        exclusive.set(guard.figures().exclusiveObjects());
    }

    /** The guard released its locks, lost or not. */
    void released(EngineGuard guard, boolean wasLost) {
        if (!guard.holds()) {
            return;
        }
        held.set(guard.figures().heldMillis());
        lost.set(wasLost ? 1 : 0);
    }

    /** Post the figures to the SQL execution the statement runs in (the UI, the event log). */
    void post(SparkContext sc) {
        String execution = sc.getLocalProperty(
            org.apache.spark.sql.execution.SQLExecution$.MODULE$.EXECUTION_ID_KEY());
        if (execution == null) {
            return;
        }
        List<SQLMetric> all = scala.collection.immutable.List$.MODULE$.empty();
        for (SQLMetric m : Arrays.asList(lost, held, exclusive, shared, attempts, wait)) {
            all = all.$colon$colon(m);
        }
        SQLMetrics.postDriverMetricUpdates(sc, execution, all);
    }
}
