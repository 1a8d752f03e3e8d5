// What zklock's Python calls in the JVM through py4j (zklock/spark/lock_client.py's
// engine_of): installing and binding lock clients, asking whether a session is guarded, and
// holding a block's locks through the engine's guard (a SQL script, holding(), Spark 3.5
// and 4.0's saveAsTable). The rest of the JVM module is not called from Python.
package zklock.engine;

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.SparkSession;

import scala.collection.Iterator;
import scala.collection.Map;

import zklock.EngineRefusal;
import zklock.adapters.SaveAsTable;
import zklock.planner.LockAnswer;
import zklock.planner.LockPlanner;

public final class EngineCalls {
    /** Make {@code next} the process's lock client (null: none), as {@code profile} says it
     *  is (ClientProfile.java; null for a client this returned before), called through
     *  {@code callbacks}, py4j's client of its Python (PythonCalls.java); returns the
     *  previous one. */
    public static EngineLockClient install(EngineLockClient next, String profile,
                                           Object callbacks) {
        return LockClients.install(next, profile, callbacks);
    }

    /** Make {@code next} the lock client of every statement {@code session} runs (null: the
     *  process's again), called through {@code callbacks}: false, and nothing changed, when
     *  {@code session} has one already (LockClients.bind). */
    public static boolean bind(SparkSession session, EngineLockClient next, String profile,
                               Object callbacks) {
        return LockClients.bind(session, next, profile, callbacks);
    }

    /** Cancel the jobs of the statement tagged {@code tag}, whose locks were lost, now and
     *  as they start (LostJobs.java). */
    public static void cancelLost(SparkContext sc, String tag) {
        LostJobs.cancel(sc, tag);
    }

    /** Send the releases of every statement that returned and wait until they are sent
     *  (Releases.java): before a direct request of this process's Python. */
    public static void flushReleases() {
        Releases.flushAll();
    }

    /** Is a lock client installed in this process? */
    public static boolean hasClient() {
        return LockClients.hasClient();
    }

    /** The child lock client's state (ChildSupervisor.status), as JSON. */
    public static String childStatus() {
        return LockClients.childStatus();
    }

    /** The counters and timers of zklock's source in this driver's metrics system
     *  (LockMetricsSource.java), as Spark's sinks read them, as JSON: {name: count}. */
    public static String lockTotals() {
        return LockMetricsSource.registered();
    }

    /** Does {@code session} plan its commands through zklock's strategy? Not merely whether
     *  spark.sql.extensions names this class: Spark skips an extension it cannot load, and a
     *  session made over an existing SparkContext may carry the setting without it. */
    public static boolean guards(SparkSession session) {
        Iterator<?> strategies =
            session.sessionState().planner().extraPlanningStrategies().iterator();
        while (strategies.hasNext()) {
            if (strategies.next() instanceof LockedCommands) {
                return true;
            }
        }
        return false;
    }

    /** Does this Spark's DataFrameWriter.saveAsTable drop an overwritten table before it runs
     *  any command (Spark 3.5, 4.0)? Then no engine hook sees the drop, and zklock's Python
     *  locks the whole call itself (zklock/spark/saveastable.py). */
    public static boolean saveAsTableDropsFirst() {
        return SaveAsTable.DROPS_FIRST;
    }

    /** Spark 3.5 and 4.0's {@code df.write.saveAsTable(table)}, locked whole before Spark
     *  starts (zklock/spark/saveastable.py calls it): X on the table and on the catalog tables
     *  at its path (the call's {@code path} option, else the one set on {@code writer}), S on
     *  what {@code ds} reads, held until {@link Held#close}, as a block's: a command the call
     *  runs is covered where these locks cover it, and refused where they do not. Refused,
     *  denied or lost as any statement is (EngineRefusal). One py4j call: the writer's
     *  options are read here, not through py4j reflection. */
    public static Held lockSaveAsTable(SparkSession session, String table, String path,
                                       Object writer, Dataset<?> ds) {
        List<String> paths = new ArrayList<>();
        if (path != null) {
            paths.add(path);
        }
        paths.addAll(pathOption(writer));
        LockPlanner planner = new LockPlanner(session, LockClients.unknownStatements(session));
        JsonNode answer = LockAnswer.union(
            LockAnswer.union(StatementPlans.answer(planner.planWrite(table, null)),
                StatementPlans.answer(planner.planPaths(paths))),
            StatementPlans.answer(planner.planDataFrame(ds)));
        String statement = "saveAsTable " + table;
        return new Held(EngineEntry.enterBlock(session, answer, "saveAsTable", statement,
            GrantAhead.NONE), "saveAsTable");
    }

    /** A block zklock's Python holds in a classic session (LockingSession.holding, a SQL
     *  script Spark runs statement by statement): the locks of {@code answer} (the planner's
     *  answer, as JSON), taken by {@code session}'s lock client as a statement's are, and held
     *  until {@link Held#close}. A statement the thread runs in the block is covered where
     *  the block's locks cover it, and refused where they do not (EngineEntry.enterBlock).
     *  Refused, denied or lost as any statement is (EngineRefusal). */
    public static Held hold(SparkSession session, String answer, String statement) {
        return new Held(EngineEntry.enterBlock(session, StatementPlans.answer(answer),
            "the block", statement, GrantAhead.NONE), statement);
    }

    /** The {@code path} option set on a DataFrameWriter ({@code option("path", p)}): its
     *  {@code extraOptions} field (Spark 3.5 and 4.0), which no public method returns. */
    private static List<String> pathOption(Object writer) {
        for (Class<?> c = writer.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field field = c.getDeclaredField("extraOptions");
                field.setAccessible(true);
                scala.Option<?> found = (scala.Option<?>) ((Map<String, ?>)
                    field.get(writer)).get("path");
                return found.isDefined() ? Collections.singletonList(
                    String.valueOf(found.get())) : Collections.emptyList();
            } catch (NoSuchFieldException e) {
                // a subclass: look in its parent
            } catch (ReflectiveOperationException | RuntimeException e) {
                throw EngineRefusal.refused("zklock: cannot read the path option of this"
                    + " saveAsTable (" + e + "); it does not run");
            }
        }
        return Collections.emptyList();
    }

    /** Locks a call holds (lockSaveAsTable), released by close. */
    public static final class Held {
        private final EngineGuard guard;
        private final String statement;

        Held(EngineGuard guard, String statement) {
            this.guard = guard;
            this.statement = statement;
        }

        /** The lock client's handle of the set (its LockSet, for a py4j client); null when
         *  nothing is held (nothing to lock, locking off, covered by a statement around). */
        public String handle() {
            return guard.handle();
        }

        /** Release them; {@code failure}: the call's error, as its first line (null: it
         *  succeeded). A loss while a successful call ran is thrown (EngineRefusal,
         *  ZKLOCK_LOCK_LOST). For a failed call, what to raise instead of its error: the
         *  loss, or the failed write (ZKLOCK_WRITE_FAILED) naming the table and what became
         *  of it, typed as the engine's refusals are; null to raise the call's own error. */
        public EngineRefusal close(String failure) {
            EngineRefusal refusal = guard.exit(statement,
                failure == null ? null : new IllegalStateException(failure));
            if (refusal != null && failure == null) {
                throw EngineRefusal.raise(refusal);
            }
            return refusal;
        }
    }


    private EngineCalls() {
    }
}
