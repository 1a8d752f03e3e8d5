// A session's own locks: LOCK TABLE t [PARTITION (...)] SHARED|EXCLUSIVE (or LOCK DATABASE)
// run in a session of the engine (a Thrift server's JDBC session, a plain session, a Spark
// Connect session without a LockingSession), held for that session until its UNLOCK TABLE
// or its end, as Hive's explicit locks are. So a step of several statements is atomic to
// everyone else: dbt's `drop table` + `create table as select` between a pre-hook's LOCK
// TABLE and a post-hook's UNLOCK TABLE. The session's statements run under them where they
// cover them (EngineEntry.underSession); what a statement needs beyond is taken for it as
// usual, and what it needs against them (X over the session's own S) is refused, where
// Hive's statement would wait on its own session's lock until it timed out.
//
// zklock's one parser reads the statement (zklock/sql/parser.py, through the lock client's
// parse call); the planner names its object (LockPlanner.planExplicit). The locks are
// ephemeral, a statement's kind: lost with the lock client's ZooKeeper session, and then
// every covered statement fails with LockLost. A LockingSession's LOCK TABLE is a lease of
// its manager instead (docs/leases.md): it never reaches the engine.
package zklock.engine;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Predicate;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.SparkSession;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Field;
import zklock.Protocol.Mode;
import zklock.planner.LockAnswer;
import zklock.planner.LockPlanner;

public final class SessionLocks {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Each session's locks, in the order taken. */
    private static final Map<SparkSession, List<SessionLock>> HELD = new ConcurrentHashMap<>();

    private SessionLocks() {
    }

    /** One lock a session holds: a LOCK TABLE's one target, or a pipeline run's. */
    private static final class SessionLock {
        final EngineGuard guard;
        final JsonNode targets;    // as the planner answers them
        final String ends;         // the client session whose end releases it; or null
        /** A pipeline's run's: the operations of the runs under it (the last one's end
         *  releases it); null for a LOCK TABLE's, which UNLOCK TABLE ends. */
        final Set<String> runs;

        SessionLock(EngineGuard guard, JsonNode targets, String ends, String run) {
            this.guard = guard;
            this.targets = targets;
            this.ends = ends;
            this.runs = run == null ? null : ConcurrentHashMap.newKeySet();
            if (run != null) {
                runs.add(run);
            }
        }

        /** Does the end of {@code id}, a client session or a run's operation, end it? */
        boolean endedBy(String id) {
            return id.equals(ends) || (runs != null && runs.remove(id) && runs.isEmpty());
        }

        /** Its target that {@code test} holds for, or null. */
        JsonNode find(Predicate<JsonNode> test) {
            for (JsonNode target : targets) {
                if (test.test(target)) {
                    return target;
                }
            }
            return null;
        }
    }

    /** Run {@code sql}, a LOCK or UNLOCK statement, in {@code session}. */
    static void run(SparkSession session, String sql) {
        String[] tokens = sql.trim().split("\\s+", 3);
        String words = tokens.length < 2 ? tokens[0] : tokens[0] + " " + tokens[1];
        EngineLockClient client = LockClients.client(session);
        if (client == null) {
            throw EngineRefusal.refused("zklock: refused " + words + ": it needs locks and no"
                + " lock client runs in this process; create a LockingSession or call"
                + " zklock.spark.enforce(spark) first");
        }
        if (EnclosingLocks.inside(session.sparkContext())) {
            throw EngineRefusal.refused("zklock: refused " + words + " inside a locked"
                + " statement or block: a session's lock outlives them");
        }
        ObjectNode request = JSON.createObjectNode();
        request.put(Field.VERSION, Protocol.Version.ENGINE).put(Field.STATEMENT, sql);
        JsonNode parsed = Documents.lockAnswer(client.parse(request.toString()));
        if (!Protocol.Outcome.PARSED.equals(parsed.path(Field.OUTCOME).asText())) {
            throw EngineRefusal.refused(parsed.path(Field.MESSAGE).asText("zklock: " + words
                + " was refused"));
        }
        Map<String, String> partition = new LinkedHashMap<>();
        parsed.path(Field.PARTITION).fields().forEachRemaining(
            e -> partition.put(e.getKey(), e.getValue().asText()));
        JsonNode answer = StatementPlans.answer(new LockPlanner(session, null).planExplicit(
            text(parsed.path(Field.TABLE)), partition, text(parsed.path(Field.DATABASE)),
            parsed.path(Field.MODE).asText(Mode.EXCLUSIVE)));
        JsonNode target = answer.path(Field.TARGETS).get(0);
        if (Protocol.Statement.LOCK.equals(parsed.path(Field.KIND).asText())) {
            lock(session, answer, target, sql);
        } else {
            unlock(session, target);
        }
    }

    private static void lock(SparkSession session, JsonNode answer, JsonNode target, String sql) {
        String name = StatementPlans.describe(answer.path(Field.TARGETS));
        String mode = target.path(Field.MODE).asText();
        Held own = held(session);
        if (own != null) {
            if (LockAnswer.covers(own.answer(), answer)) {
                return;  // held already (in this mode, or in X, or in X above it)
            }
            for (SessionLock h : locks(session)) {
                JsonNode met = h.find(t -> LockAnswer.sameObject(t, target)
                    || (Mode.EXCLUSIVE.equals(mode) && LockAnswer.contains(target, t)));
                if (met != null) {
                    throw EngineRefusal.refused("zklock: refused LOCK of " + name + " in " + mode
                        + ": this session holds " + StatementPlans.describe(
                            JSON.createArrayNode().add(met)) + " in "
                        + met.path(Field.MODE).asText() + " (UNLOCK it first)");
                }
            }
        }
        EngineGuard guard = EngineEntry.enterForSession(session, answer, "LOCK TABLE",
            sql.trim() + " (held by the session)");
        if (!guard.holds()) {  // its LockingSession turned locking off: nothing to hold
            return;
        }
        keep(session, guard, JSON.createArrayNode().add(target), SessionEnds.current(session),
            null);
    }

    /** Hold {@code answer}'s locks for {@code session} until its Spark Connect session
     *  {@code ends} ends, or the operation {@code run} that runs it does, as its LOCK TABLE
     *  would: a pipeline's run (PipelineRuns), named {@code statement}. Where the session's
     *  locks cover it already, it runs under them, and a run's among them last until its
     *  end too. */
    static void holdForRun(SparkSession session, JsonNode answer, String statement,
                           String ends, String run) {
        SessionEnds.listen(session.sparkContext());
        Held own = held(session);
        if (own != null && LockAnswer.covers(own.answer(), answer)) {
            for (SessionLock h : locks(session)) {
                if (h.runs != null) {
                    h.runs.add(run);
                }
            }
            return;
        }
        EngineGuard guard = EngineEntry.enterForSession(session, answer, "a pipeline's run",
            statement);
        if (guard.holds()) {
            keep(session, guard, answer.path(Field.TARGETS), ends, run);
        }
    }

    /** Keep {@code guard}'s locks ({@code targets}) for the session, to the end of its client
     *  session {@code ends} (null: none to hear) or, for a pipeline's, of its run's operation
     *  {@code run} (null: a LOCK TABLE's); refused (and released) where the session ended
     *  while they were taken (a client gone while its LOCK waited): its end is heard once,
     *  and nothing would release them after it. */
    private static void keep(SparkSession session, EngineGuard guard, JsonNode targets,
                             String ends, String run) {
        SessionLock kept = new SessionLock(guard, targets, ends, run);
        HELD.compute(session, (s, mine) -> {  // (atomic with ended()'s removal of a list)
            List<SessionLock> out = mine != null ? mine
                : Collections.synchronizedList(new ArrayList<>());
            out.add(kept);
            return out;
        });
        if (ends != null && SessionEnds.hasEnded(ends)) {
            ended(ends);
            throw EngineRefusal.refused("zklock: the session ended while its lock on "
                + StatementPlans.describe(targets) + " was taken; released, and the statement"
                + " was not run");
        }
    }

    private static void unlock(SparkSession session, JsonNode target) {
        SessionLock found = null;
        List<SessionLock> mine = HELD.get(session);
        if (mine != null) {
            synchronized (mine) {
                for (SessionLock h : mine) {
                    if (h.runs == null && h.find(t -> LockAnswer.sameObject(t, target)) != null) {
                        found = h;
                        break;
                    }
                }
                if (found != null) {
                    mine.remove(found);
                }
            }
        }
        if (found == null) {
            throw EngineRefusal.refused("zklock: this session holds no lock on "
                + StatementPlans.describe(JSON.createArrayNode().add(target)) + " (LOCK TABLE)");
        }
        EngineRefusal lost = found.guard.releaseForSession("the session's locks");
        if (lost != null) {
            throw EngineRefusal.raise(lost);
        }
    }

    /** Release every lock the end of {@code ends}, a client session or a run's operation,
     *  ends (SessionEnds). */
    static void ended(String ends) {
        for (Map.Entry<SparkSession, List<SessionLock>> e : HELD.entrySet()) {
            List<SessionLock> mine = e.getValue();
            List<SessionLock> done = new ArrayList<>();
            synchronized (mine) {
                for (SessionLock h : mine) {
                    if (h.endedBy(ends)) {
                        done.add(h);
                    }
                }
                mine.removeAll(done);
            }
            for (SessionLock h : done) {
                EngineRefusal lost = h.guard.releaseForSession("the session's locks");
                if (lost != null) {
                    System.err.println(lost.getMessage() + "; its session has ended");
                }
            }
            HELD.computeIfPresent(e.getKey(), (s, now) -> now.isEmpty() ? null : now);
        }
    }

    private static List<SessionLock> locks(SparkSession session) {
        List<SessionLock> mine = HELD.get(session);
        if (mine == null) {
            return Collections.emptyList();
        }
        synchronized (mine) {
            return new ArrayList<>(mine);
        }
    }

    /** What {@code session} holds, as one set; null when it holds nothing. */
    static Held held(SparkSession session) {
        List<SessionLock> mine = locks(session);
        return mine.isEmpty() ? null : new Held(mine);
    }

    /** A session's locks as one set: what covers its statements. */
    static final class Held {
        private final List<SessionLock> locks;
        private final JsonNode answer;

        private Held(List<SessionLock> locks) {
            this.locks = locks;
            JsonNode all = null;
            for (SessionLock h : locks) {
                JsonNode one = h.guard.heldAnswer();
                all = all == null ? one : LockAnswer.union(all, one);
            }
            this.answer = all;
        }

        JsonNode answer() {
            return answer;
        }

        List<String> nodes() {
            List<String> out = new ArrayList<>();
            locks.forEach(h -> out.addAll(h.guard.nodes()));
            return out;
        }

        String zookeeper() {
            return locks.get(0).guard.zookeeper();
        }

        String token() {
            return locks.get(0).guard.token();
        }

        List<String> jobTags() {
            List<String> out = new ArrayList<>();
            locks.forEach(h -> out.add(h.guard.jobTag()));
            return out;
        }

        /** The part of {@code wanted} these locks do not cover, for {@code command} to take;
         *  refused where it would wait on them: X on an object they hold, or above one. */
        JsonNode remainder(JsonNode wanted, String command) {
            ObjectNode rest = LockAnswer.remainder(answer, wanted);
            for (JsonNode w : rest.path(Field.TARGETS)) {
                if (!Mode.EXCLUSIVE.equals(w.path(Field.MODE).asText())) {
                    continue;
                }
                for (SessionLock h : locks) {
                    JsonNode met = h.find(t -> LockAnswer.sameObject(t, w)
                        || LockAnswer.contains(w, t));
                    if (met != null) {
                        throw EngineRefusal.refused("zklock: refused " + command + ": it needs X"
                            + " on " + StatementPlans.describe(JSON.createArrayNode().add(w))
                            + ", where this session holds " + StatementPlans.describe(
                                JSON.createArrayNode().add(met)) + " in "
                            + met.path(Field.MODE).asText()
                            + " (LOCK TABLE): UNLOCK it first, or lock it EXCLUSIVE");
                    }
                }
            }
            return rest;
        }
    }

    private static String text(JsonNode value) {
        return value.isTextual() ? value.asText() : null;
    }
}
