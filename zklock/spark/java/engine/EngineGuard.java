// How a statement under zklock's engine extension gets its locks, before it runs:
//  1. Inside a locked statement (one the engine locked whose command runs others, as a CTAS
//     runs its insert; or a block the engine holds for zklock's Python, enterBlock), that
//     statement's locks cover it. They travel with the execution as the local properties
//     that zklock's committers read (CommitFence.ZOOKEEPER and NODES, set with the fencing
//     token), and are checked to still exist, as the fenced commit checks them (a lock whose
//     node is gone is lost, whoever removed it); a block's, here, to cover the statement
//     too; a Spark Connect client's (its operation tag, which a client could forge), by the
//     lock client, to be lock nodes that cover it.
//  2. Otherwise LockPlanner plans the statement (a command from its parsed form,
//     ParsedForms.PARSED; a query from its analysed plan), the same planning EXPLAIN LOCKS
//     shows. A statement with nothing to lock runs as it is.
//  3. Without a lock client for its session it is refused, in one line naming what it needs
//     (reads: EngineReads). Otherwise the session's lock client (LockClients.client) takes
//     the locks (all or none, with its retries; or refuses them under
//     spark.zklock.engine.mode=refuse) and they are held, under their own job tag and fence,
//     for exactly the statement. A command granted only after a wait is planned again.
// A command whose parsed form is unknown (Spark built it analyzed) is refused: zklock cannot
// tell what it writes, and it never runs a write unlocked.
package zklock.engine;

import java.util.Collections;
import java.util.Arrays;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.SparkSession;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Field;
import zklock.commit.CommitFence;
import zklock.commit.WriteOutcome;
import zklock.planner.LockAnswer;
import zklock.planner.LockPlanner;
import zklock.planner.PlanWalker;

final class EngineGuard {
    /** The format of the lock client's requests and answers (EngineLockClient.java). */
    static final int VERSION = Protocol.ENGINE_VERSION;
    /** The operation tag carrying a Connect statement's lock nodes. */
    static final String FENCE_TAG = Protocol.FENCE_TAG;
    /** The local property naming this engine's grant whose nodes are in CommitFence's: a
     *  statement's (its nested executions are the statement's own) or a block's
     *  (enterBlock: what it covers is checked). */
    static final String ENGINE_HELD = "zklock.engine.held";
    /** How often a command granted after waiting is planned again before giving up. */
    static final int REPLANS = 5;

    private static final ObjectMapper JSON = new ObjectMapper();
    /** Job tags this thread left on its later jobs (detach): removed at its next statement. */
    private static final ThreadLocal<List<String>> LEFT_TAGS =
        ThreadLocal.withInitial(ArrayList::new);
    private static final EngineGuard COVERED =
        new EngineGuard(null, null, null, null, null, Collections.emptyList(), null);
    /** The blocks zklock's Python holds through the engine (enterBlock), by handle: the
     *  statements a block runs are covered only by what it holds. */
    private static final Map<String, EngineGuard> BLOCKS =
        new java.util.concurrent.ConcurrentHashMap<>();

    private final EngineLockClient client;
    private final String handle;
    private final String jobTag;
    private final SparkContext sc;
    /** The objects it holds in X, as a person names them; null when it holds none. */
    private final String writes;
    /** Its lock nodes, as granted, and the ZooKeeper holding them (connect string). */
    private final List<String> nodes;
    private String zookeeper = "";
    /** The answer whose locks it holds: what covers a block's statements (enterBlock). */
    private final JsonNode held;
    /** Whether a detached guard's set was released (releaseDetached runs once). */
    private final java.util.concurrent.atomic.AtomicBoolean released =
        new java.util.concurrent.atomic.AtomicBoolean();
    // Its figures (LockFigures.java): waited for the grant, over how many attempts (those of
    // an earlier grant of the same statement, given back to replan, included); when granted
    // and released; whether the set was lost.
    private long waitNanos;
    private int attempts;
    private String waitedFor = "";
    private long grantedAt;
    private long releasedAt;
    /** How long its end took on its path (the check, or the release), and whether its
     *  release was sent after it returned (Releases.java). */
    private long endNanos;
    private boolean releasedAfter;
    private volatile boolean lost;
    /** Its fencing token, as granted. */
    private String token = "";
    /** The job tags of its session's locks (SessionLocks) it runs under too: removed with
     *  its own. */
    private List<String> sessionTags = Collections.emptyList();
    /** The tables where its node was alone when granted (FreshListings.Version). */
    private Map<String, FreshListings.Version> sole = Collections.emptyMap();

    private EngineGuard(EngineLockClient client, String handle, String jobTag, SparkContext sc,
                        String writes, List<String> nodes, JsonNode held) {
        this.client = client;
        this.handle = handle;
        this.jobTag = jobTag;
        this.sc = sc;
        this.writes = writes;
        this.nodes = nodes;
        this.held = held;
    }

    /** The locks {@code command} needs, held from now until {@link #exit}. Without a lock
     *  client it is refused. */
    static EngineGuard enter(SparkSession session, LogicalPlan command) {
        String name = PlanWalker.nodeName(command);
        if (name.startsWith("TruncateTable") && !insideLockedStatement(session.sparkContext())
                && PipelineRuns.materializing()) {  // a step of a pipeline's refresh
            JsonNode answer = plan(session, command);
            PipelineRuns.holdForRun(session, answer, statement(ParsedForms.parsed(session,
                command), name, describe(answer.path(Field.TARGETS))));
        }
        return enter(session, () -> plan(session, command), name, what -> {
            throw EngineRefusal.refused("zklock: refused " + name + " on " + what + ": it needs"
                + " locks and no lock client runs in this process; create a LockingSession or"
                + " call zklock.spark.enforce(spark) first, or send it through zklock's Spark"
                + " Connect server");
        }, what -> statement(ParsedForms.parsed(session, command), name, what),
            () -> replan(session, command), true);
    }

    /** The S locks a query needs (planned from its {@code analyzed} plan), held from now
     *  until {@link #exit}. Without a lock client, EngineReads says whether it is refused or
     *  runs with a warning. */
    static EngineGuard enterQuery(SparkSession session, LogicalPlan analyzed) {
        return enter(session, () -> planQuery(session, analyzed), "a query",
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

    /** A session's own lock (SessionLocks: LOCK TABLE in a session of the engine):
     *  {@code answer}'s locks, taken as a command's are (waiting as it would), then held for
     *  the session rather than this thread, whose local properties are left as they were. */
    static EngineGuard enterForSession(SparkSession session, JsonNode answer, String name,
                                       String statement) {
        EngineGuard guard = enterCall(session, answer, name, statement, false);
        if (guard.client != null) {
            WriteOutcome.end();
            guard.sc.removeJobTag(guard.jobTag);
            clearFence(guard.sc);
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
        JsonNode released = read(client.release(handle, false), VERSION);
        if (gone == null && !Protocol.OUTCOME_LOST.equals(released.path(Field.OUTCOME).asText())) {
            return null;
        }
        lost = true;
        return EngineRefusal.of(Protocol.OUTCOME_LOST, "zklock: the session's lock on "
            + describe(held.path(Field.TARGETS)) + " was lost while it held it ("
            + (gone != null ? gone : released.path(Field.MESSAGE).asText("session lost")) + ")",
            null);
    }

    /** A statement its session's locks cover whole (SessionLocks): it runs under them, its
     *  nested statements checked to be covered as a block's are, its commits fenced on their
     *  nodes, its jobs cancelled with theirs; it holds nothing of its own. */
    static EngineGuard underSession(SparkSession session, SessionLocks.Held own) {
        SparkContext sc = session.sparkContext();
        try {
            CommitFence.exist(own.zookeeper(), own.nodes());
        } catch (IOException e) {
            throw EngineRefusal.raise(EngineRefusal.of(Protocol.OUTCOME_LOST,
                "zklock: the session's locks (LOCK TABLE) are lost: " + e.getMessage(), e));
        }
        EngineGuard guard = new EngineGuard(null, java.util.UUID.randomUUID().toString(), null,
            sc, exclusive(own.answer()), own.nodes(), own.answer());
        guard.zookeeper = own.zookeeper();
        guard.sessionTags = own.jobTags();
        guard.sessionTags.forEach(sc::addJobTag);
        sc.setLocalProperty(Protocol.FENCING_TOKEN, own.token());
        sc.setLocalProperty(CommitFence.ZOOKEEPER, own.zookeeper());
        sc.setLocalProperty(CommitFence.NODES, String.join("\n", own.nodes()));
        sc.setLocalProperty(ENGINE_HELD, guard.handle);
        BLOCKS.put(guard.handle, guard);
        WriteOutcome.begin();
        return guard;
    }

    private static void clearFence(SparkContext sc) {
        sc.setLocalProperty(Protocol.FENCING_TOKEN, null);
        sc.setLocalProperty(CommitFence.ZOOKEEPER, null);
        sc.setLocalProperty(CommitFence.NODES, null);
        sc.setLocalProperty(ENGINE_HELD, null);
    }

    /** A block zklock's Python holds (LockingSession.holding, a SQL script Spark runs
     *  statement by statement): {@code answer}'s locks, held from now until {@link #exit},
     *  as a command's are. Unlike a command's nested executions, a statement the block runs
     *  is covered only where the block's locks cover it (a block holding S on a table does
     *  not cover a write to it): else it is refused. */
    static EngineGuard enterBlock(SparkSession session, JsonNode answer, String statement) {
        EngineGuard guard = enterCall(session, answer, "the block", statement);
        if (guard.client != null) {
            BLOCKS.put(guard.handle, guard);
        }
        return guard;
    }

    /** What both share: covered inside a locked statement, nothing to do without targets,
     *  {@code withoutClient} (refuse, or let it run) where no lock client runs, else the
     *  client's grant; {@code replan} (commands) plans again from the catalog as it is now. */
    private static EngineGuard enter(SparkSession session, Supplier<JsonNode> planned,
                                     String name, Consumer<String> withoutClient,
                                     Function<String, String> statement,
                                     Supplier<JsonNode> replan, boolean sessionCover) {
        SparkContext sc = session.sparkContext();
        removeLeftTags(sc);
        if (heldLocks(session, planned, sc)) {
            return COVERED;
        }
        JsonNode answer = planned.get();
        if (answer.path(Field.TARGETS).size() == 0) {
            return COVERED;
        }
        String what = describe(answer.path(Field.TARGETS));
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
        String text = statement.apply(what);
        long waitedBefore = 0;
        int attemptsBefore = 0;
        String waitedForBefore = "";
        for (int i = 0; i < REPLANS; i++) {
            Grant grant = take(session, client, answer, name, what, text);
            if (own != null && grant.guard.holds()) {  // fenced on the session's nodes too
                grant.guard.alsoUnder(own);
            }
            if (grant.guard.holds()) {
                grant.guard.waitNanos += waitedBefore;
                grant.guard.attempts += attemptsBefore;
                if (grant.guard.waitedFor.isEmpty()) {  // the wait was before the re-plan
                    grant.guard.waitedFor = waitedForBefore;
                }
            }
            if (grant.guard == COVERED || replan == null
                    || (grant.attempts <= 1 && !answer.path(Field.RECHECK).asBoolean(false))) {
                return grant.guard;
            }
            // Granted only after waiting, or planned on what existed (CREATE ... IF NOT
            // EXISTS of an existing object, in S): the catalog may have changed meanwhile.
            // Spark runs the command as it analyzed it, so the locks must cover that plan and
            // the catalog as it is now; when they do not, ask again for both.
            JsonNode fresh = own == null ? replan.get() : own.remainder(replan.get(), name);
            if (LockAnswer.covers(answer, fresh)) {
                return grant.guard;
            }
            waitedBefore = grant.guard.waitNanos;
            attemptsBefore = grant.guard.attempts;
            waitedForBefore = grant.guard.waitedFor;
            grant.guard.exit(name, null);
            answer = LockAnswer.union(answer, fresh);
        }
        throw EngineRefusal.raise(EngineRefusal.of(Protocol.OUTCOME_DENIED, "zklock: the catalog kept changing"
            + " the locks " + name + " on " + what + " needs (" + REPLANS + " plans)", null));
    }

    /** A grant: the guard holding it, and how many attempts the lock client made. */
    private static final class Grant {
        final EngineGuard guard;
        final int attempts;

        Grant(EngineGuard guard, int attempts) {
            this.guard = guard;
            this.attempts = attempts;
        }
    }

    /** Ask the lock client for {@code answer}'s locks, all or none; on a grant, tag this
     *  thread's jobs with the set (cancelled when it is lost) and let nested executions see
     *  its nodes. */
    private static Grant take(SparkSession session, EngineLockClient client,
                                    JsonNode answer, String name, String what,
                                    String statement) {
        SparkContext sc = session.sparkContext();
        String handle = java.util.UUID.randomUUID().toString();
        Map<String, Object> request = new LinkedHashMap<>();
        request.put(Field.VERSION, VERSION);
        request.put(Field.HANDLE, handle);
        request.put(Field.ANSWER, answer);
        request.put(Field.STATEMENT, statement);
        request.put(Field.USER, clientUser(sc));
        request.put(Field.APPLICATION, sc.applicationId());
        request.put(Field.COMMAND, name);
        request.put(Field.OBJECTS, what);
        request.put(Field.QUERY_ID, sc.getLocalProperty(Protocol.QUERY_ID));
        String stream = sc.getLocalProperty(Protocol.STREAM);
        if (stream != null) {  // a micro-batch's block (stream/MicroBatch.java)
            request.put(Field.STREAM, stream);
        }
        request.put(Field.CONF, CarriedConf.of(session));  // how it waits, as its session set
        request.put(Field.RELEASES, Releases.takeFor(client));  // before this grant: in order
        JsonNode grant;
        long asked = System.nanoTime();
        try {
            grant = read(client.acquire(write(request)), VERSION);
        } catch (RuntimeException e) {  // the grant may have happened: release it, if any
            if (callbackGone(e)) {
                LockClients.gone(client, Collections.emptyList());
                throw EngineRefusal.raise(EngineRefusal.of(Protocol.OUTCOME_UNAVAILABLE, "zklock: the lock"
                    + " client in this application's Python did not answer (" + e.getMessage()
                    + "); the statement did not run", e));
            }
            try {
                client.release(handle, true);
            } catch (RuntimeException releaseFailed) {
                e.addSuppressed(releaseFailed);
            }
            throw e;
        }
        String outcome = grant.path(Field.OUTCOME).asText();
        if (Protocol.UNLOCKED.equals(outcome)) {  // its LockingSession turned locking off (as Hive's
            return new Grant(COVERED, 1);  // hive.support.concurrency=false does)
        }
        if (!Protocol.GRANTED.equals(outcome)) {
            throw EngineRefusal.raise(EngineRefusal.of(outcome, grant.path(Field.MESSAGE).asText(
                "zklock: " + name + " on " + what + ": the lock client refused it"), null));
        }
        List<String> nodes = new ArrayList<>();
        grant.path(Field.NODES).forEach(n -> nodes.add(n.asText()));
        String jobTag = grant.path(Field.QUERY_ID).asText();
        sc.addJobTag(jobTag);
        sc.setLocalProperty(Protocol.FENCING_TOKEN, grant.path(Field.TOKEN).asText());
        sc.setLocalProperty(CommitFence.ZOOKEEPER, grant.path(Field.ZOOKEEPER).asText());
        sc.setLocalProperty(CommitFence.NODES, String.join("\n", nodes));
        sc.setLocalProperty(ENGINE_HELD, handle);
        WriteOutcome.begin();
        EngineGuard guard = new EngineGuard(client, handle, jobTag, sc, exclusive(answer), nodes,
            answer);
        guard.grantedAt = System.nanoTime();
        guard.waitNanos = guard.grantedAt - asked;
        guard.attempts = grant.path(Field.ATTEMPTS).asInt(1);
        guard.waitedFor = grant.path(Field.WAITED_FOR).asText("");
        guard.zookeeper = grant.path(Field.ZOOKEEPER).asText();
        guard.token = grant.path(Field.TOKEN).asText();
        guard.sole = FreshListings.versions(grant.path(Field.SOLE), guard.zookeeper);
        return new Grant(guard, guard.attempts);
    }

    /** Does this execution run inside a locked statement? Then its locks cover it, once
     *  checked (else EngineRefusal). The engine's own statement's nested executions are
     *  checked to still exist; a block's (enterBlock), also to be covered by what the block
     *  holds (a block holding S on a table does not cover a write to it). A Spark Connect
     *  client's (its operation tag, which a client could forge) is checked by the lock
     *  client to be lock nodes covering what the statement needs and to exist, or, with no
     *  lock client here, to exist. */
    private static boolean heldLocks(SparkSession session, Supplier<JsonNode> planned,
                                     SparkContext sc) {
        String zookeeper = sc.getLocalProperty(CommitFence.ZOOKEEPER);
        List<String> paths = new ArrayList<>();
        boolean claimed;  // nodes a statement of zklock's Python holds, not this engine's own
        if (heldHere(sc)) {
            paths.addAll(Arrays.asList(sc.getLocalProperty(CommitFence.NODES).split("\n")));
            String engineHeld = sc.getLocalProperty(ENGINE_HELD);
            claimed = engineHeld == null;
            EngineGuard block = engineHeld == null ? null : BLOCKS.get(engineHeld);
            if (block != null) {  // a block of Python's, held here: does it cover this?
                JsonNode missing = LockAnswer.uncovered(block.held, planned.get());
                if (missing != null) {
                    throw EngineRefusal.refused("zklock: the block's locks do not cover "
                        + describe(JSON.createArrayNode().add(missing)) + " in "
                        + missing.path(Field.MODE).asText() + ": the statement does not run");
                }
            }
        } else {
            JsonNode fence = connectFence(sc);
            if (fence == null) {
                return false;
            }
            zookeeper = fence.path(Field.ZOOKEEPER).asText();
            fence.path(Field.NODES).forEach(n -> paths.add(n.asText()));
            claimed = true;
        }
        if (claimed) {  // a Connect client's nodes, or ones this engine did not grant
            EngineLockClient client = LockClients.client(session);
            if (client != null) {
                Map<String, Object> claim = new LinkedHashMap<>();
                claim.put(Field.VERSION, VERSION);
                claim.put(Field.ANSWER, planned.get());
                claim.put(Field.NODES, paths);
                JsonNode verdict = read(client.verify(write(claim)), VERSION);
                String outcome = verdict.path(Field.OUTCOME).asText();
                if (!Protocol.COVERED.equals(outcome)) {
                    throw EngineRefusal.raise(EngineRefusal.of(outcome,
                        verdict.path(Field.MESSAGE).asText("zklock: claim refused"), null));
                }
                return true;
            }
        }
        if (paths.isEmpty()) {
            throw EngineRefusal.refused("zklock: a locked statement named no lock nodes; it"
                + " does not run");
        }
        try {
            CommitFence.exist(zookeeper, paths);
        } catch (IOException e) {
            throw EngineRefusal.raise(EngineRefusal.of(Protocol.OUTCOME_LOST, e.getMessage(), e));
        }
        return true;
    }

    /** The block whose grant covers this thread's statements (enterBlock: a micro-batch, a
     *  block of zklock's Python), for its figures; null outside one. */
    static EngineGuard blockAround(SparkContext sc) {
        String handle = sc.getLocalProperty(ENGINE_HELD);
        EngineGuard block = handle == null ? null : BLOCKS.get(handle);
        return block != null && block.holds() ? block : null;
    }

    /** Does this thread run inside a locked statement: this process's own (its nodes in the
     *  local properties) or a Spark Connect client's (its operation tag)? */
    static boolean insideLockedStatement(SparkContext sc) {
        return heldHere(sc) || connectFence(sc) != null;
    }

    /** Does this thread run under locks a client took for it (a Spark Connect LockingSession's
     *  statement, a block zklock's Python holds), rather than under this engine's own grant
     *  for the statement around it? Its reads are then listed again as of those locks. */
    static boolean underClaim(SparkContext sc) {
        return heldHere(sc) ? sc.getLocalProperty(ENGINE_HELD) == null : connectFence(sc) != null;
    }

    /** Do the local properties carry a locked statement's nodes (set by zklock here)? */
    private static boolean heldHere(SparkContext sc) {
        String zookeeper = sc.getLocalProperty(CommitFence.ZOOKEEPER);
        String nodes = sc.getLocalProperty(CommitFence.NODES);
        return zookeeper != null && !zookeeper.isEmpty() && nodes != null && !nodes.isEmpty();
    }

    /** The lock nodes a Spark Connect client's LockingSession statement holds: its operation
     *  tag FENCE_TAG (zklock/spark/locked_statement.py's ConnectJobs); null without one. */
    private static JsonNode connectFence(SparkContext sc) {
        scala.collection.Iterator<String> tags = sc.getJobTags().iterator();
        while (tags.hasNext()) {
            String tag = tags.next();
            int at = tag.indexOf("_Tag_" + FENCE_TAG);
            if (tag.startsWith("SparkConnect_") && at >= 0) {
                String encoded = tag.substring(at + "_Tag_".length() + FENCE_TAG.length());
                try {
                    return JSON.readTree(java.util.Base64.getUrlDecoder().decode(encoded));
                } catch (IOException | IllegalArgumentException e) {
                    throw EngineRefusal.refused("zklock: unreadable lock nodes in operation"
                        + " tag " + tag);
                }
            }
        }
        return null;
    }

    /** The planner's answer for {@code command}, from its parsed form (and the analysis Spark
     *  made of it); EngineRefusal when it has none, when the planner refuses it, or when it is not
     *  planned as a command. */
    private static JsonNode plan(SparkSession session, LogicalPlan command) {
        LogicalPlan parsed = ParsedForms.parsed(session, command);
        String name = PlanWalker.nodeName(command);
        if (parsed == null) {
            throw EngineRefusal.refused("zklock: cannot tell what " + name + " writes (Spark built it"
                + " already analyzed), so it does not run: run it as SQL or through a DataFrame");
        }
        LockPlanner planner = new LockPlanner(session, LockClients.unknownStatements(session));
        LogicalPlan analyzed = ParsedForms.analyzed(command);
        JsonNode answer = read(analyzed != null ? planner.planCommand(parsed, analyzed)
            : planner.planPlan(parsed, true), LockAnswer.VERSION);
        if (Protocol.KIND_REFUSED.equals(answer.path(Field.KIND).asText())) {
            throw EngineRefusal.refused("zklock: " + answer.path(Field.MESSAGE).asText());
        }
        if (!Protocol.KIND_COMMAND.equals(answer.path(Field.KIND).asText())) {
            throw EngineRefusal.refused("zklock: " + name + " was planned as a query; it does not run"
                + " unlocked");
        }
        return answer;
    }

    /** The command's answer planned again from its parsed form, analysed anew: the catalog as
     *  it is now (the answer Spark's analysis of it gave was planned before a wait). */
    private static JsonNode replan(SparkSession session, LogicalPlan command) {
        JsonNode answer = read(new LockPlanner(session, LockClients.unknownStatements(session)).planPlan(
            ParsedForms.parsed(session, command), true), LockAnswer.VERSION);
        if (Protocol.KIND_REFUSED.equals(answer.path(Field.KIND).asText())) {
            throw EngineRefusal.refused("zklock: " + answer.path(Field.MESSAGE).asText());
        }
        return answer;
    }

    /** The planner's answer for a query: S on what its analyzed plan reads; EngineRefusal
     *  when the planner refuses it. */
    private static JsonNode planQuery(SparkSession session, LogicalPlan analyzed) {
        JsonNode answer = read(new LockPlanner(session, LockClients.unknownStatements(session)).planQuery(analyzed),
            LockAnswer.VERSION);
        if (Protocol.KIND_REFUSED.equals(answer.path(Field.KIND).asText())) {
            throw EngineRefusal.refused("zklock: " + answer.path(Field.MESSAGE).asText());
        }
        return answer;
    }

    /** A planner answer, read; EngineRefusal when the planner refused. */
    static JsonNode answer(String text) {
        JsonNode answer = read(text, LockAnswer.VERSION);
        if (Protocol.KIND_REFUSED.equals(answer.path(Field.KIND).asText())) {
            throw EngineRefusal.refused("zklock: " + answer.path(Field.MESSAGE).asText());
        }
        return answer;
    }

    /** The tables a query reads, as a person names them; null when it reads none. */
    static String describeReads(SparkSession session, LogicalPlan analyzed) {
        JsonNode targets = planQuery(session, analyzed).path(Field.TARGETS);
        return targets.size() == 0 ? null : describe(targets);
    }

    /** Run also under its session's locks: their nodes in what its commits are fenced on,
     *  their job tags on its jobs. */
    private void alsoUnder(SessionLocks.Held own) {
        List<String> fenced = new ArrayList<>(nodes);
        fenced.addAll(own.nodes());
        sc.setLocalProperty(CommitFence.NODES, String.join("\n", fenced));
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

    /** Whether this guard holds locks of its own (false: covered, or nothing to lock). */
    boolean holds() {
        return client != null;
    }

    /** How long the statement waited for its locks, in ms (LockFigures.java). */
    long waitMillis() {
        return waitNanos / 1_000_000;
    }

    /** How many attempts its lock client made for them. */
    int attempts() {
        return attempts;
    }

    /** Whom it waited for, as its last denial named them ("" when it did not wait). */
    String waitedFor() {
        return waitedFor;
    }

    /** How many objects it holds in S (a partition's parents included). */
    int sharedObjects() {
        return objectsIn("S");
    }

    /** How many objects it holds in X. */
    int exclusiveObjects() {
        return objectsIn("X");
    }

    private int objectsIn(String mode) {
        int n = 0;
        for (JsonNode target : held.path(Field.TARGETS)) {
            n += mode.equals(target.path(Field.MODE).asText()) ? 1 : 0;
        }
        return n;
    }

    /** Table {@code key}'s version at this grant (FreshListings.key), where its node was
     *  alone; null elsewhere, and for a guard that holds nothing of its own. */
    FreshListings.Version sole(String key) {
        return sole.get(key);
    }

    /** How long it held them, in ms, once released (0 before). */
    long heldMillis() {
        return releasedAt == 0 ? 0 : (releasedAt - grantedAt) / 1_000_000;
    }

    /** How long its end took on its path, in ns: its check, or its release. */
    long endNanos() {
        return endNanos;
    }

    /** Was its release sent after it returned (Releases.java)? */
    boolean releasedAfter() {
        return releasedAfter;
    }

    /** Whether its set was lost while it held it. */
    boolean lost() {
        return lost;
    }

    /** For a query whose jobs run after the call that planned them (an RDD handed to its
     *  caller): nested executions on this thread no longer see the set, but the thread's
     *  later jobs keep its tag (cancelled if it is lost) until its next statement; the set
     *  itself is released by {@link #releaseDetached}, at the SQL execution's end. */
    void detach() {
        if (client == null) {
            return;
        }
        clearFence(sc);
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
        releasedAt = System.nanoTime();
        WriteOutcome.Summary written = WriteOutcome.end();
        BLOCKS.remove(handle);
        sc.removeJobTag(jobTag);
        sessionTags.forEach(sc::removeJobTag);
        clearFence(sc);
        String refused = fenceRefusal(failure);
        String gone = null;  // its nodes, checked at its end: null when all are there
        if (failure == null && refused == null) {
            gone = written.committedThroughFence() ? null : goneAtEnd();
            if (gone == null) {  // held throughout: released after it returns (Releases)
                Releases.later(client, handle, nodes);
                releasedAfter = true;
                endNanos = System.nanoTime() - releasedAt;
                return null;
            }
        }
        JsonNode released;
        try {
            released = read(client.release(handle, failure != null), VERSION);
        } catch (RuntimeException e) {
            if (!callbackGone(e)) {
                throw e;
            }
            LockClients.gone(client, nodes);  // its Python is gone, and with it the set's session
            released = JSON.createObjectNode().put(Field.OUTCOME, Protocol.OUTCOME_LOST).put(Field.MESSAGE,
                "the lock client in this application's Python stopped answering");
        }
        endNanos = System.nanoTime() - releasedAt;
        List<String> objects = new ArrayList<>();
        released.path(Field.OBJECTS).forEach(o -> objects.add(o.asText()));
        Map<String, String> parameters = Collections.singletonMap(Field.OBJECTS, String.join("\n", objects));
        if (gone != null && !Protocol.OUTCOME_LOST.equals(released.path(Field.OUTCOME).asText())) {
            // ZooKeeper says so before the client may know: the loss is ZooKeeper's word
            released = JSON.createObjectNode().put(Field.OUTCOME, Protocol.OUTCOME_LOST)
                .put(Field.MESSAGE, gone);
        }
        lost = refused != null || Protocol.OUTCOME_LOST.equals(released.path(Field.OUTCOME).asText());
        if (refused != null) {  // the loss may be known to ZooKeeper only, not to the client yet
            return EngineRefusal.of(Protocol.OUTCOME_LOST, Protocol.message("commit_refused",
                "refused", refused, "command", command), failure, parameters);
        }
        if (!Protocol.OUTCOME_LOST.equals(released.path(Field.OUTCOME).asText())) {
            return failure == null ? null : writeFailed(command, failure, written);
        }
        if (failure == null && writes != null && written.committedThroughFence()) {
            // Every job committed after the fence found its locks in ZooKeeper: the write was
            // made under them, and its rows are in the table. Raising now would tell the
            // caller it failed (a retry would duplicate it), so it returns, and the loss,
            // which came after, is logged. A query's loss is raised: its rows may mix states.
            System.err.println("zklock: locks lost after " + command + " writing " + writes
                + " committed through the fence (" + released.path(Field.MESSAGE).asText("session"
                + " lost") + "); the statement returns: its write is complete");
            return null;
        }
        String why = Protocol.message(failure != null ? "lost_cancelled" : "lost_completed",
            "command", command, "reason", released.path(Field.MESSAGE).asText("session lost"));
        return EngineRefusal.of(Protocol.OUTCOME_LOST, why, failure, parameters);
    }

    /** The end of a statement its session's locks covered (underSession): they stay held;
     *  the refusal naming their loss, when they were lost while it ran, else null. */
    private EngineRefusal leaveSession(String command, Throwable failure) {
        WriteOutcome.Summary written = WriteOutcome.end();
        BLOCKS.remove(handle);
        sessionTags.forEach(sc::removeJobTag);
        clearFence(sc);
        String gone = fenceRefusal(failure);
        if (gone == null && !written.committedThroughFence()) {
            gone = goneAtEnd();
        }
        if (gone == null) {
            return null;
        }
        lost = true;
        return EngineRefusal.of(Protocol.OUTCOME_LOST, Protocol.message(
            failure != null ? "lost_cancelled" : "lost_completed", "command", command,
            "reason", "the session's locks (LOCK TABLE): " + gone), failure);
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

    /** A write that failed under its locks, typed (ZKLOCK_WRITE_FAILED), naming what it
     *  wrote and what became of it (WriteOutcome), with Spark's error as its cause; null
     *  for a statement that wrote nothing or failed with zklock's own refusal. */
    private EngineRefusal writeFailed(String command, Throwable failure,
                                      WriteOutcome.Summary written) {
        String outcome = written.describe();
        if (writes == null || failure instanceof EngineRefusal) {
            return null;
        }
        Throwable root = failure;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        String cause = firstLine(failure);
        if (root != failure && !cause.contains(firstLine(root))) {  // the task's own error
            cause += " (caused by: " + firstLine(root) + ")";
        }
        return EngineRefusal.writeFailed("zklock: " + command + " writing " + writes
            + " failed; " + outcome + ". Spark's error: " + cause, failure,
            Collections.singletonMap(Field.TABLE, writes));
    }

    private static String firstLine(Throwable e) {
        return e.getMessage() == null || e.getMessage().trim().isEmpty()
            ? e.getClass().getName() : e.getMessage().trim().split("\n", 2)[0];
    }

    /** The objects {@code answer} locks in X, as a person names them; null for none. */
    private static String exclusive(JsonNode answer) {
        for (JsonNode t : answer.path(Field.TARGETS)) {
            if ("X".equals(t.path(Field.MODE).asText())) {
                return describe(answer.path(Field.TARGETS));
            }
        }
        return null;
    }

    /** Is {@code e} py4j's failure to reach a Python lock client (its callback server gone:
     *  no channel to it, or the connection broken), not an error the client raised? py4j
     *  says so with its network exception, an I/O cause, or, where Python's end of a pinned
     *  thread's connection closed (ClientServerConnection), "Received empty command". */
    static boolean callbackGone(Throwable e) {
        boolean py4j = false;
        boolean io = false;
        for (Throwable t = e; t != null; t = t.getCause()) {
            String name = t.getClass().getName();
            String message = String.valueOf(t.getMessage());
            py4j |= name.startsWith("py4j.");
            io |= t instanceof IOException || name.equals("py4j.Py4JNetworkException")
                || message.contains("communication channel")
                || message.contains("Received empty command");
        }
        return py4j && io;
    }

    /** The refusal of zklock's committers behind {@code failure} (CommitFence.REFUSED, as its
     *  message begins), or null. */
    private static String fenceRefusal(Throwable failure) {
        for (Throwable t = failure; t != null; t = t.getCause()) {
            String message = t.getMessage();
            int at = message == null ? -1 : message.indexOf(CommitFence.REFUSED);
            if (at >= 0) {
                return message.substring(at).split("\n", 2)[0].trim();
            }
        }
        return null;
    }

    private static String statement(LogicalPlan parsed, String name, String what) {
        scala.Option<String> text = parsed.origin().sqlText();
        return text.isDefined() ? text.get() : name + " on " + what;
    }

    /** The objects a command locks in X (else in S), as a person names them. */
    static String describe(JsonNode targets) {
        List<String> names = new ArrayList<>();
        for (String mode : new String[] {"X", "S"}) {
            for (JsonNode t : targets) {
                String name = t.path(Field.DB).asText()
                    + (t.path(Field.TABLE).isNull() ? "" : "." + t.path(Field.TABLE).asText());
                if (mode.equals(t.path(Field.MODE).asText()) && !names.contains(name)) {
                    names.add(name);
                }
            }
            if (!names.isEmpty()) {
                break;
            }
        }
        return names.size() <= 3 ? String.join(", ", names)
            : String.join(", ", names.subList(0, 3)) + " (+" + (names.size() - 3) + " more)";
    }

    /** The user a statement runs for, where it is not this process's: a Spark Connect
     *  client's (from its operation's job tag), else the one Spark sets for SQL's
     *  current_user() (a JDBC client of Spark's Thrift server); null otherwise. */
    private static String clientUser(SparkContext sc) {
        String user = connectTagPart(sc, "_User_", "_Session_");
        return user != null ? user
            : org.apache.spark.sql.catalyst.CurrentUserContext$.MODULE$.CURRENT_USER().get();
    }

    /** The part between {@code from} and {@code to} of the job tag Spark Connect gives the
     *  operation running this thread's jobs
     *  (SparkConnect_OperationTag_User_<user>_Session_<id>_Operation_<id>); null outside one. */
    static String connectTagPart(SparkContext sc, String from, String to) {
        scala.collection.Iterator<String> tags = sc.getJobTags().iterator();
        while (tags.hasNext()) {
            String tag = tags.next();
            int at = tag.indexOf(from);
            int end = tag.indexOf(to);
            if (tag.startsWith("SparkConnect_") && at >= 0 && end > at) {
                return tag.substring(at + from.length(), end);
            }
        }
        return null;
    }

    /** An answer of the lock client, read (EngineRefusal when unreadable). */
    static JsonNode readAnswer(String text) {
        return read(text, VERSION);
    }

    private static JsonNode read(String text, int version) {
        try {
            JsonNode doc = JSON.readTree(text);
            if (doc.path(Field.VERSION).asInt() != version) {
                throw EngineRefusal.refused("zklock: an answer in format " + doc.path(Field.VERSION)
                    + ", where this module reads format " + version);
            }
            return doc;
        } catch (IOException e) {
            throw EngineRefusal.refused("zklock: unreadable answer of the lock client: "
                + e.getMessage());
        }
    }

    private static String write(Object doc) {
        try {
            return JSON.writeValueAsString(doc);
        } catch (IOException e) {
            throw EngineRefusal.refused("zklock: could not write a lock request: " + e.getMessage());
        }
    }
}
