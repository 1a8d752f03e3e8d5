// When a client's session ends, the locks it held for the session are released
// (SessionLocks). Spark's Thrift server posts SparkListenerThriftServerSessionClosed when a
// JDBC session closes, Spark Connect SparkListenerConnectSessionClosed, both with the
// session's id; a statement knows its session's id from Hive's session state on its thread
// (the Thrift server sets it: the id of the JDBC session's handle) or from its Spark Connect
// operation's job tag. Neither class is on a plain application's class path: they are told
// apart by name. A session of a plain application has no end to hear: its locks last until
// its UNLOCK TABLE or the lock client's end. A pipeline's run is held until its session ends
// or, first, its Spark Connect operation (SparkListenerConnectOperationClosed, with the
// operation's id: Spark closes an operation whose client is gone within minutes).
package zklock.engine;

import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;

import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.sql.SparkSession;

final class SessionEnds extends SparkListener {
    private static final Map<SparkContext, SessionEnds> LISTENERS =
        Collections.synchronizedMap(new WeakHashMap<>());
    /** The events that end a session, by class name. */
    private static final Set<String> ENDS = new HashSet<>(Arrays.asList(
        "SparkListenerThriftServerSessionClosed", "SparkListenerConnectSessionClosed"));
    /** The event that ends a Spark Connect operation (a pipeline's run: PipelineRuns), by
     *  class name. */
    private static final String OPERATION_ENDS = "SparkListenerConnectOperationClosed";

    /** The id of the client session running this statement of {@code session}, listening
     *  for its end; null for a session with no end to hear. */
    static String current(SparkSession session) {
        SparkContext sc = session.sparkContext();
        String id = ConnectTags.session(sc);
        if (id == null) {
            id = thriftSession();
        }
        if (id != null) {
            listen(sc);
        }
        return id;
    }

    /** Listen for the ends of {@code sc}'s client sessions (once per application). */
    static void listen(SparkContext sc) {
        synchronized (LISTENERS) {
            if (!LISTENERS.containsKey(sc)) {
                SessionEnds ends = new SessionEnds();
                sc.addSparkListener(ends);
                LISTENERS.put(sc, ends);
            }
        }
    }

    /** The sessions whose end was heard, newest last (as many as a server's sessions over
     *  hours: an id is looked up only for a lock taken as its session ended). */
    private static final Map<String, Boolean> ENDED = Recent.map(10000);

    /** Whether the end of session {@code id} was heard. */
    static boolean hasEnded(String id) {
        return ENDED.containsKey(id);
    }

    @Override
    public void onOtherEvent(SparkListenerEvent event) {
        String name = event.getClass().getSimpleName();
        boolean operation = OPERATION_ENDS.equals(name);
        if (!operation && !ENDS.contains(name)) {
            return;
        }
        try {
            Object id = event.getClass().getMethod(operation ? "operationId" : "sessionId")
                .invoke(event);
            if (id != null && operation) {  // (no run waits for an operation Spark runs)
                PipelineRuns.ended(id.toString());
            } else if (id != null) {
                ENDED.put(id.toString(), Boolean.TRUE);
                SessionLocks.ended(id.toString());
                ConnectBlocks.ended(id.toString());
            }
        } catch (ReflectiveOperationException e) {
            System.err.println("zklock: cannot read the session of " + event + ": " + e);
        }
    }

    /** The Thrift server's JDBC session of this thread: the id of Hive's session state,
     *  which the server names after the session's handle; null outside the server. */
    private static String thriftSession() {
        if (!String.valueOf(System.getProperty("sun.java.command"))
                .contains("thriftserver.HiveThriftServer2")) {
            return null;
        }
        try {
            Class<?> state = Class.forName("org.apache.hadoop.hive.ql.session.SessionState");
            Object current = state.getMethod("get").invoke(null);
            return current == null ? null
                : String.valueOf(state.getMethod("getSessionId").invoke(current));
        } catch (ReflectiveOperationException | LinkageError e) {
            return null;
        }
    }
}
