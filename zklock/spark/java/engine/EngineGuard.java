// The grant a statement holds under zklock's engine extension, from before it runs to its end:
//  1. Inside a locked statement its locks cover it, once checked (EnclosingLocks).
//  2. Otherwise its statement is planned (StatementPlans: the same planning EXPLAIN LOCKS
//     shows). A statement with nothing to lock runs as it is.
//  3. Without a lock client for its session it is refused, in one line naming what it needs
//     (reads: EngineReads). Otherwise the session's lock client (LockClients.client) takes
//     the locks (all or none, with its retries; or refuses them under
//     spark.zklock.engine.mode=refuse) and they are held, under their own job tag and fence,
//     for exactly the statement. A command granted only after a wait is planned again.
//  4. At its end its set is released, after it returns where its nodes were there
//     throughout (Releases), and a loss or failure is translated for its caller
//     (EngineFailures).
package zklock.engine;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Field;
import zklock.commit.CommitFence;
import zklock.commit.WriteOutcome;
import zklock.planner.LockAnswer;
import zklock.planner.PlanWalker;

final class EngineGuard {
    /** How often a command granted after waiting is planned again before giving up. */
    static final int REPLANS = 5;

    /** Job tags this thread left on its later jobs (detach): removed at its next statement. */
    private static final ThreadLocal<List<String>> LEFT_TAGS =
        ThreadLocal.withInitial(ArrayList::new);
    private static final EngineGuard COVERED =
        new EngineGuard(null, null, null, null, Collections.emptyList(), "", "", null);

    private final EngineLockClient client;
    private final String handle;
    private final String jobTag;
    private final SparkContext sc;
    /** Its lock nodes, as granted, and the ZooKeeper holding them (connect string). */
    private final List<String> nodes;
    private final String zookeeper;
    /** Its fencing token, as granted. */
    private final String token;
    /** The answer whose locks it holds: what covers a block's statements (enterBlock). */
    private final JsonNode held;
    /** The objects it holds in X, as a person names them; null when it holds none. */
    private final String writes;
    private final GrantFigures figures;
    /** Whether a detached guard's set was released (releaseDetached runs once). */
    private final AtomicBoolean released = new AtomicBoolean();
    /** The job tags of its session's locks (SessionLocks) it runs under too: removed with
     *  its own. */
    private List<String> sessionTags = Collections.emptyList();
    /** The tables where its node was alone when granted (FreshListings.Version). */
    private Map<String, FreshListings.Version> sole = Collections.emptyMap();

    private EngineGuard(EngineLockClient client, String handle, String jobTag, SparkContext sc,
                        List<String> nodes, String zookeeper, String token, JsonNode held) {
        this.client = client;
        this.handle = handle;
        this.jobTag = jobTag;
        this.sc = sc;
        this.nodes = nodes;
        this.zookeeper = zookeeper;
        this.token = token;
        this.held = held;
        this.writes = held == null ? null : StatementPlans.exclusive(held);
        this.figures = new GrantFigures(held);
    }

    /** The locks {@code command} needs, held from now until {@link #exit}. Without a lock
     *  client it is refused. */
    static EngineGuard enter(SparkSession session, LogicalPlan command) {
        String name = PlanWalker.nodeName(command);
        if (name.startsWith("TruncateTable") && !EnclosingLocks.inside(session.sparkContext())
                && PipelineRuns.materializing()) {  // a step of a pipeline's refresh
            JsonNode answer = StatementPlans.command(session, command);
            PipelineRuns.holdForRun(session, answer, StatementPlans.text(ParsedForms.parsed(
                session, command), name, StatementPlans.describe(answer.path(Field.TARGETS))));
        }
        return enter(session, () -> StatementPlans.command(session, command), name, what -> {
            throw EngineRefusal.refused("zklock: refused " + name + " on " + what + ": it needs"
                + " locks and no lock client runs in this process; create a LockingSession or"
                + " call zklock.spark.enforce(spark) first, or send it through zklock's Spark"
                + " Connect server");
        }, what -> StatementPlans.text(ParsedForms.parsed(session, command), name, what),
            () -> StatementPlans.commandNow(session, command), true);
    }

    /** The S locks a query needs (planned from its {@code analyzed} plan), held from now
     *  until {@link #exit}. Without a lock client, EngineReads says whether it is refused or
     *  runs with a warning. */
    static EngineGuard enterQuery(SparkSession session, LogicalPlan analyzed) {
        return enter(session, () -> StatementPlans.query(session, analyzed), "a query",
            what -> EngineReads.unlocked(session, what), what -> {
                scala.Option<String> text = analyzed.origin().sqlText();
                return text.isDefined() ? text.get() : "query reading " + what;
            }, null, true);
    }

    /** The locks of a call the engine cannot see whole (Spark 3.5 and 4.0's saveAsTable,
     *  which drops an overwritten table before any command runs): {@code answer}'s, held
     *  from now until {@link #exit}, as a command's are. */
    static EngineGuard enterCall(SparkSession session, JsonNode answer, String name,
                                 String statement) {
        return enterCall(session, answer, name, statement, true);
    }

    private static EngineGuard enterCall(SparkSession session, JsonNode answer, String name,
                                         String statement, boolean sessionCover) {
        return enter(session, () -> answer, name, what -> {
            throw EngineRefusal.refused("zklock: refused " + name + " on " + what + ": it"
                + " needs locks and no lock client runs in this process");
        }, what -> statement, null, sessionCover);
    }

    /** A block zklock's Python holds (LockingSession.holding, a SQL script Spark runs
     *  statement by statement): {@code answer}'s locks, held from now until {@link #exit},
     *  as a command's are. Unlike a command's nested executions, a statement the block runs
     *  is covered only where the block's locks cover it (a block holding S on a table does
     *  not cover a write to it): else it is refused. */
    static EngineGuard enterBlock(SparkSession session, JsonNode answer, String statement) {
        EngineGuard guard = enterCall(session, answer, "the block", statement);
        if (guard.holds()) {
            EnclosingLocks.asBlock(guard);
        }
        return guard;
    }

    /** A session's own lock (SessionLocks: LOCK TABLE in a session of the engine):
     *  {@code answer}'s locks, taken as a command's are (waiting as it would), then held for
     *  the session rather than this thread, whose local properties are left as they were. */
    static EngineGuard enterForSession(SparkSession session, JsonNode answer, String name,
                                       String statement) {
        EngineGuard guard = enterCall(session, answer, name, statement, false);
        if (guard.holds()) {
            WriteOutcome.end();
            guard.sc.removeJobTag(guard.jobTag);
            EnclosingLocks.clear(guard.sc);
        }
        return guard;
    }

    /** Release a session's own lock (SessionLocks: UNLOCK TABLE, the session's end): null,
     *  or the refusal that names its loss while it was held. */
    EngineRefusal releaseForSession() {
        if (client == null) {
            return null;
        }
        String gone = goneAtEnd();  // (ZooKeeper's word: its client may not know yet)
        JsonNode answer = Documents.lockAnswer(client.release(handle, false));
        if (gone == null && !Protocol.OUTCOME_LOST.equals(answer.path(Field.OUTCOME).asText())) {
            return null;
        }
        figures.lost();
        return EngineRefusal.of(Protocol.OUTCOME_LOST, "zklock: the session's lock on "
            + StatementPlans.describe(held.path(Field.TARGETS)) + " was lost while it held it ("
            + (gone != null ? gone : answer.path(Field.MESSAGE).asText("session lost")) + ")",
            null);
    }

    /** A statement its session's locks cover whole (SessionLocks): it runs under them, its
     *  nested statements checked to be covered as a block's are, its commits fenced on their
     *  nodes, its jobs cancelled with theirs; it holds nothing of its own. */
    static EngineGuard underSession(SparkSession session, SessionLocks.Held own) {
        try {
            CommitFence.exist(own.zookeeper(), own.nodes());
        } catch (IOException e) {
            throw EngineRefusal.raise(EngineRefusal.of(Protocol.OUTCOME_LOST,
                "zklock: the session's locks (LOCK TABLE) are lost: " + e.getMessage(), e));
        }
        SparkContext sc = session.sparkContext();
        EngineGuard guard = new EngineGuard(null, UUID.randomUUID().toString(), null, sc,
            own.nodes(), own.zookeeper(), own.token(), own.answer());
        guard.sessionTags = own.jobTags();
        guard.sessionTags.forEach(sc::addJobTag);
        EnclosingLocks.enter(sc, guard);
        EnclosingLocks.asBlock(guard);
        WriteOutcome.begin();
        return guard;
    }

    /** What every entry shares: covered inside a locked statement, nothing to do without
     *  targets, {@code withoutClient} (refuse, or let it run) where no lock client runs, the
     *  session's own locks where they cover it, else the client's grant; {@code replan}
     *  (commands) plans again from the catalog as it is now. */
    private static EngineGuard enter(SparkSession session, Supplier<JsonNode> planned,
                                     String name, Consumer<String> withoutClient,
                                     Function<String, String> statement,
                                     Supplier<JsonNode> replan, boolean sessionCover) {
        removeLeftTags(session.sparkContext());
        if (EnclosingLocks.cover(session, planned)) {
            return COVERED;
        }
        JsonNode answer = planned.get();
        if (answer.path(Field.TARGETS).size() == 0) {
            return COVERED;
        }
        String what = StatementPlans.describe(answer.path(Field.TARGETS));
        EngineLockClient client = LockClients.client(session);
        if (client == null) {
            withoutClient.accept(what);
            return COVERED;
        }
        if (!LockClients.bound(session)
                && "refuse".equals(LockClients.setting(session, Protocol.ENGINE_MODE))) {
            throw EngineRefusal.refused("zklock: refused " + name + " on " + what + ": "
                + Protocol.ENGINE_MODE.key + "=refuse runs only what a LockingSession runs");
        }
        // under its session's own locks (LOCK TABLE): what they cover is theirs; the rest, if
        // any, is taken for the statement as usual
        SessionLocks.Held own = sessionCover ? SessionLocks.held(session) : null;
        if (own != null) {
            answer = own.remainder(answer, name);
            if (answer.path(Field.TARGETS).size() == 0) {
                return underSession(session, own);
            }
        }
        Request request = new Request(session, client, own, name, what, statement.apply(what));
        return request.grant(answer, replan);
    }

    /** A statement's request for its locks, granted (and planned again) until its locks
     *  cover it as the catalog is now. */
    private static final class Request {
        final SparkSession session;
        final EngineLockClient client;
        /** Its session's own locks it runs under too; null for none. */
        final SessionLocks.Held own;
        final String name;
        final String what;
        final String statement;

        Request(SparkSession session, EngineLockClient client, SessionLocks.Held own,
                String name, String what, String statement) {
            this.session = session;
            this.client = client;
            this.own = own;
            this.name = name;
            this.what = what;
            this.statement = statement;
        }

        /** The guard holding {@code answer}'s locks. Granted only after waiting, or planned
         *  on what existed (CREATE ... IF NOT EXISTS of an existing object, in S), a command
         *  ({@code replan}) is planned again: Spark runs it as it analyzed it, so the locks
         *  must cover that plan and the catalog as it is now; when they do not, ask again
         *  for both. */
        EngineGuard grant(JsonNode answer, Supplier<JsonNode> replan) {
            GrantFigures before = null;
            for (int i = 0; i < REPLANS; i++) {
                EngineGuard guard = take(answer);
                if (guard == COVERED) {
                    return guard;
                }
                boolean waited = guard.figures.attempts() > 1;
                if (own != null) {  // fenced on the session's nodes too
                    guard.alsoUnder(own);
                }
                if (before != null) {
                    guard.figures.after(before);
                }
                if (replan == null || (!waited && !answer.path(Field.RECHECK).asBoolean(false))) {
                    return guard;
                }
                JsonNode fresh = own == null ? replan.get() : own.remainder(replan.get(), name);
                if (LockAnswer.covers(answer, fresh)) {
                    return guard;
                }
                before = guard.figures;
                guard.exit(name, null);
                answer = LockAnswer.union(answer, fresh);
            }
            throw EngineRefusal.raise(EngineRefusal.of(Protocol.OUTCOME_DENIED, "zklock: the"
                + " catalog kept changing the locks " + name + " on " + what + " needs ("
                + REPLANS + " plans)", null));
        }

        /** Ask the lock client for {@code answer}'s locks, all or none: the guard holding
         *  them, or COVERED where its LockingSession turned locking off (as Hive's
         *  hive.support.concurrency=false does); else its refusal, raised. */
        private EngineGuard take(JsonNode answer) {
            String handle = UUID.randomUUID().toString();
            String request = LockRequests.acquire(session, client, handle, answer, name, what,
                statement);
            long asked = System.nanoTime();
            JsonNode grant = ask(handle, request);
            String outcome = grant.path(Field.OUTCOME).asText();
            if (Protocol.UNLOCKED.equals(outcome)) {
                return COVERED;
            }
            if (!Protocol.GRANTED.equals(outcome)) {
                throw EngineRefusal.raise(EngineRefusal.of(outcome, grant.path(Field.MESSAGE)
                    .asText("zklock: " + name + " on " + what + ": the lock client refused it"),
                    null));
            }
            return granted(handle, grant, answer, asked);
        }

        /** The lock client's answer to {@code request}; where the call failed (the grant may
         *  have happened), the set released, if any, and the failure raised. */
        private JsonNode ask(String handle, String request) {
            try {
                return Documents.lockAnswer(client.acquire(request));
            } catch (RuntimeException e) {
                if (EngineFailures.callbackGone(e)) {
                    LockClients.gone(client, Collections.emptyList());
                    throw EngineRefusal.raise(EngineRefusal.of(Protocol.OUTCOME_UNAVAILABLE,
                        "zklock: the lock client in this application's Python did not answer ("
                        + e.getMessage() + "); the statement did not run", e));
                }
                try {
                    client.release(handle, true);
                } catch (RuntimeException releaseFailed) {
                    e.addSuppressed(releaseFailed);
                }
                throw e;
            }
        }

        /** The guard of a grant: this thread's jobs tagged with its set (cancelled when it
         *  is lost), and its nodes seen by nested executions and committers. */
        private EngineGuard granted(String handle, JsonNode grant, JsonNode answer,
                                    long asked) {
            SparkContext sc = session.sparkContext();
            List<String> nodes = new ArrayList<>();
            grant.path(Field.NODES).forEach(n -> nodes.add(n.asText()));
            String jobTag = grant.path(Field.QUERY_ID).asText();
            EngineGuard guard = new EngineGuard(client, handle, jobTag, sc, nodes,
                grant.path(Field.ZOOKEEPER).asText(), grant.path(Field.TOKEN).asText(), answer);
            sc.addJobTag(jobTag);
            EnclosingLocks.enter(sc, guard);
            WriteOutcome.begin();
            guard.figures.granted(asked, grant.path(Field.ATTEMPTS).asInt(1),
                grant.path(Field.WAITED_FOR).asText(""));
            guard.sole = FreshListings.versions(grant.path(Field.SOLE), guard.zookeeper);
            return guard;
        }
    }

    /** Run also under its session's locks: their nodes in what its commits are fenced on,
     *  their job tags on its jobs. */
    private void alsoUnder(SessionLocks.Held own) {
        List<String> fenced = new ArrayList<>(nodes);
        fenced.addAll(own.nodes());
        EnclosingLocks.fenceOn(sc, fenced);
        sessionTags = own.jobTags();
        sessionTags.forEach(sc::addJobTag);
    }

    /** Its lock nodes, as granted. */
    List<String> nodes() {
        return nodes;
    }

    /** The ZooKeeper its nodes are in (connect string with chroot). */
    String zookeeper() {
        return zookeeper;
    }

    /** The job tag of its set: its jobs are cancelled when the set is lost. */
    String jobTag() {
        return jobTag;
    }

    /** Its fencing token. */
    String token() {
        return token;
    }

    /** The answer whose locks it holds. */
    JsonNode heldAnswer() {
        return held;
    }

    /** The lock client's handle of its set; null when it holds none. */
    String handle() {
        return client == null ? null : handle;
    }

    /** What names it among the locks a thread runs inside of (EnclosingLocks). */
    String key() {
        return handle;
    }

    /** Whether this guard holds locks of its own (false: covered, or nothing to lock). */
    boolean holds() {
        return client != null;
    }

    /** Its figures: waits, attempts, objects, times. */
    GrantFigures figures() {
        return figures;
    }

    /** Table {@code key}'s version at this grant (FreshListings.key), where its node was
     *  alone; null elsewhere, and for a guard that holds nothing of its own. */
    FreshListings.Version sole(String key) {
        return sole.get(key);
    }

    /** For a query whose jobs run after the call that planned them (an RDD handed to its
     *  caller): nested executions on this thread no longer see the set, but the thread's
     *  later jobs keep its tag (cancelled if it is lost) until its next statement; the set
     *  itself is released by {@link #releaseDetached}, at the SQL execution's end. */
    void detach() {
        if (client == null) {
            return;
        }
        EnclosingLocks.clear(sc);
        LEFT_TAGS.get().add(jobTag);
        LEFT_TAGS.get().addAll(sessionTags);
    }

    /** Release a detached guard's set (any thread; once). */
    void releaseDetached() {
        if (client != null && released.compareAndSet(false, true)) {
            client.release(handle, false);
        }
    }

    private static void removeLeftTags(SparkContext sc) {
        List<String> left = LEFT_TAGS.get();
        for (String tag : left) {
            sc.removeJobTag(tag);
        }
        left.clear();
    }

    /** Release what {@link #enter} took. When its locks were lost while the command ran,
     *  the refusal to fail the command with, caused by {@code failure} (its own error, or
     *  null when it completed); else null. */
    EngineRefusal exit(String command, Throwable failure) {
        countWrites();
        if (client == null) {
            return handle == null ? null : leaveSession(command, failure);
        }
        figures.releasing();
        WriteOutcome.Summary written = WriteOutcome.end();
        sc.removeJobTag(jobTag);
        sessionTags.forEach(sc::removeJobTag);
        EnclosingLocks.leave(sc, this);
        String refused = EngineFailures.fenceRefusal(failure);
        String gone = null;  // its nodes, checked at its end: null when all are there
        if (failure == null && refused == null) {
            gone = written.committedThroughFence() ? null : goneAtEnd();
            if (gone == null) {  // held throughout: released after it returns (Releases)
                Releases.later(client, handle, nodes);
                figures.ended(true);
                return null;
            }
        }
        JsonNode answer = releaseNow(failure != null);
        figures.ended(false);
        if (gone != null && !Protocol.OUTCOME_LOST.equals(answer.path(Field.OUTCOME).asText())) {
            // ZooKeeper says so before the client may know: the loss is ZooKeeper's word
            answer = Documents.JSON.createObjectNode().put(Field.OUTCOME, Protocol.OUTCOME_LOST)
                .put(Field.MESSAGE, gone).set(Field.OBJECTS, answer.path(Field.OBJECTS));
        }
        if (refused != null || Protocol.OUTCOME_LOST.equals(answer.path(Field.OUTCOME).asText())) {
            figures.lost();
        }
        return EngineFailures.atEnd(command, writes, failure, refused, answer, written);
    }

    /** Release its set now ({@code failed}: the statement failed); the client's answer, or
     *  a loss where its Python stopped answering (and with it the set's session). */
    private JsonNode releaseNow(boolean failed) {
        try {
            return Documents.lockAnswer(client.release(handle, failed));
        } catch (RuntimeException e) {
            if (!EngineFailures.callbackGone(e)) {
                throw e;
            }
            LockClients.gone(client, nodes);
            return Documents.JSON.createObjectNode().put(Field.OUTCOME, Protocol.OUTCOME_LOST)
                .put(Field.MESSAGE, "the lock client in this application's Python stopped"
                    + " answering");
        }
    }

    /** The end of a statement its session's locks covered (underSession): they stay held;
     *  the refusal naming their loss, when they were lost while it ran, else null. */
    private EngineRefusal leaveSession(String command, Throwable failure) {
        WriteOutcome.Summary written = WriteOutcome.end();
        sessionTags.forEach(sc::removeJobTag);
        EnclosingLocks.leave(sc, this);
        String gone = EngineFailures.fenceRefusal(failure);
        if (gone == null && !written.committedThroughFence()) {
            gone = goneAtEnd();
        }
        if (gone == null) {
            return null;
        }
        figures.lost();
        return EngineFailures.lost(command, "the session's locks (LOCK TABLE): " + gone,
            failure, Collections.emptyMap());
    }

    /** Its writes have ended (done or failed): the listings this JVM took of what it held in
     *  X are kept no more (FreshListings.written); under locks a client holds for it (a
     *  Connect claim, a block), whatever it wrote is unnamed here, so every listing. */
    private void countWrites() {
        if (held == null) {
            FreshListings.written(null, null);
            return;
        }
        for (JsonNode t : held.path(Field.TARGETS)) {
            if ("X".equals(t.path(Field.MODE).asText())) {
                FreshListings.written(t.path(Field.DB).asText(),
                    t.path(Field.TABLE).isTextual() ? t.path(Field.TABLE).asText() : null);
            }
        }
    }

    /** Whether its lock nodes are all still there now that it completed (a sync and an exists
     *  each, one read round trip of the JVM's own ZooKeeper client: CommitFence): null when
     *  they are, so that it held them throughout (a node, once gone, never returns); else
     *  why not, ZooKeeper out of reach included (fail closed). */
    private String goneAtEnd() {
        try {
            CommitFence.check(zookeeper, nodes);
            return null;
        } catch (IOException e) {
            return e.getMessage();
        }
    }
}
