// Where a statement enters zklock's engine for its locks, before it runs (EngineGuard holds
// what it gets, to its end):
//  1. Inside a locked statement its locks cover it, once checked (EnclosingLocks).
//  2. Otherwise its statement is planned (StatementPlans: the same planning EXPLAIN LOCKS
//     shows). A statement with nothing to lock runs as it is.
//  3. Without a lock client for its session it is refused, in one line naming what it needs
//     (reads: EngineReads). Under its session's own locks (LOCK TABLE) what they cover is
//     theirs. Otherwise the session's lock client (LockClients.client) takes the locks (all
//     or none, with its retries; or refuses them under spark.zklock.engine.mode=refuse:
//     GrantRequest) and they are held, under their own job tag and fence, for exactly the
//     statement.
package zklock.engine;

import java.io.IOException;
import java.util.List;
import java.util.UUID;
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
import zklock.planner.PlanWalker;

final class EngineEntry {
    private EngineEntry() {
    }

    /** The locks {@code command} needs, held from now until {@link #exit}. Without a lock
     *  client it is refused. */
    static EngineGuard enter(SparkSession session, LogicalPlan command) {
        String name = PlanWalker.nodeName(command);
        if (name.startsWith("TruncateTable") && !EnclosingLocks.inside(session.sparkContext())
                && PipelineRuns.materializing()) {  // a step of a pipeline's refresh
            JsonNode answer = StatementPlans.command(session, command);
            PipelineRuns.checkStep(session, answer, StatementPlans.text(ParsedForms.parsed(
                session, command), name, StatementPlans.describe(answer.path(Field.TARGETS))));
        }
        return enter(session, () -> StatementPlans.command(session, command), name, what -> {
            throw EngineRefusal.refused("zklock: refused " + name + " on " + what + ": it needs"
                + " locks and no lock client runs in this process; create a LockingSession or"
                + " call zklock.spark.enforce(spark) first, or send it through zklock's Spark"
                + " Connect server");
        }, what -> StatementPlans.text(ParsedForms.parsed(session, command), name, what),
            () -> StatementPlans.commandNow(session, command), true, GrantAhead.NONE);
    }

    /** The S locks a query needs (planned from its {@code analyzed} plan), held from now
     *  until {@link #exit}. Without a lock client, EngineReads says whether it is refused or
     *  runs with a warning. */
    static EngineGuard enterQuery(SparkSession session, LogicalPlan analyzed) {
        return enter(session, () -> StatementPlans.query(session, analyzed), "a query",
            what -> EngineReads.unlocked(session, what), what -> {
                scala.Option<String> text = analyzed.origin().sqlText();
                return text.isDefined() ? text.get() : "query reading " + what;
            }, null, true, GrantAhead.NONE);
    }

    /** The locks of a call the engine holds for its caller (a missing table's wait):
     *  {@code answer}'s, held from now until {@link EngineGuard#exit}, as a command's are. */
    static EngineGuard enterCall(SparkSession session, JsonNode answer, String name,
                                 String statement) {
        return enterCall(session, answer, name, statement, true, GrantAhead.NONE);
    }

    private static EngineGuard enterCall(SparkSession session, JsonNode answer, String name,
                                         String statement, boolean sessionCover,
                                         GrantAhead ahead) {
        return enter(session, () -> answer, name, what -> {
            throw EngineRefusal.refused("zklock: refused " + name + " on " + what + ": it"
                + " needs locks and no lock client runs in this process");
        }, what -> statement, null, sessionCover, ahead);
    }

    /** A block held through the engine: one of zklock's Python (LockingSession.holding, a
     *  SQL script Spark runs statement by statement, Spark 3.5 and 4.0's saveAsTable, which
     *  drops an overwritten table before any command runs) or a micro-batch's
     *  (stream/MicroBatch.java): {@code answer}'s locks, held from now until
     *  {@link EngineGuard#exit}, as a command's are. Unlike a command's nested executions, a
     *  statement the block runs is covered only where the block's locks cover it (a block
     *  holding S on a table does not cover a write to it): else it is refused. Its grant
     *  may have been asked for {@code ahead} (GrantAhead); unclaimed here, it is dropped. */
    static EngineGuard enterBlock(SparkSession session, JsonNode answer, String name,
                                  String statement, GrantAhead ahead) {
        EngineGuard guard;
        try {
            guard = enterCall(session, answer, name, statement, true, ahead);
        } finally {
            ahead.drop();
        }
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
        EngineGuard guard = enterCall(session, answer, name, statement, false,
            GrantAhead.NONE);
        if (guard.holds()) {
            guard.heldForSession();
        }
        return guard;
    }

    /** A statement its session's locks cover whole (SessionLocks): it runs under them, its
     *  nested statements checked to be covered as a block's are, its commits fenced on their
     *  nodes, its jobs cancelled with theirs; it holds nothing of its own. */
    static EngineGuard underSession(SparkSession session, SessionLocks.Held own) {
        try {
            CommitFence.exist(own.zookeeper(), own.nodes());
        } catch (IOException e) {
            throw EngineRefusal.raise(EngineRefusal.of(Protocol.Outcome.LOST,
                "zklock: the session's locks (LOCK TABLE) are lost: " + e.getMessage(), e));
        }
        return under(session, own.nodes(), own.zookeeper(), own.token(), own.answer(),
            own.jobTags(), "the session's locks (LOCK TABLE)");
    }

    /** A statement that runs under locks held for longer than it (the session's, a Connect
     *  client's block: {@code whose}), once checked to cover it: {@code nodes} in
     *  {@code zookeeper}, fenced with {@code token}, holding {@code answer}, their jobs tagged
     *  {@code jobTags}. Its nested statements are checked to be covered as a block's are,
     *  its commits fenced on their nodes, its jobs cancelled with theirs. */
    static EngineGuard under(SparkSession session, List<String> nodes, String zookeeper,
                             String token, JsonNode answer, List<String> jobTags,
                             String whose) {
        SparkContext sc = session.sparkContext();
        EngineGuard guard = new EngineGuard(null, UUID.randomUUID().toString(), null, sc,
            nodes, zookeeper, token, answer);
        guard.runsUnder(jobTags, whose);
        EnclosingLocks.enter(sc, guard);
        EnclosingLocks.asBlock(guard);
        WriteOutcome.begin();
        return guard;
    }

    /** What every entry shares: covered inside a locked statement, nothing to do without
     *  targets, {@code withoutClient} (refuse, or let it run) where no lock client runs, the
     *  session's own locks where they cover it, else the client's grant; {@code replan}
     *  (commands) plans again from the catalog as it is now; {@code ahead}: its grant,
     *  where it was asked for ahead (GrantAhead.NONE: asked here). */
    private static EngineGuard enter(SparkSession session, Supplier<JsonNode> planned,
                                     String name, Consumer<String> withoutClient,
                                     Function<String, String> statement,
                                     Supplier<JsonNode> replan, boolean sessionCover,
                                     GrantAhead ahead) {
        EngineGuard.removeLeftTags(session.sparkContext());
        if (EnclosingLocks.cover(session, planned)) {
            return EngineGuard.COVERED;
        }
        ConnectBlocks.Block block = ConnectBlocks.around(session);
        if (block != null) {  // a Spark Connect client's block, which the engine holds
            return ConnectBlocks.under(session, block, planned.get());
        }
        JsonNode answer = planned.get();
        if (answer.path(Field.TARGETS).size() == 0) {
            return EngineGuard.COVERED;
        }
        String what = StatementPlans.describe(answer.path(Field.TARGETS));
        EngineLockClient client = LockClients.client(session);
        if (client == null) {
            withoutClient.accept(what);
            return EngineGuard.COVERED;
        }
        if (refusesUnbound(session)) {
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
        return new GrantRequest(session, client, own, name, what, statement.apply(what),
            ahead).grant(answer, replan);
    }

    /** The lock client {@link #enter} would ask, on this thread, for {@code answer}'s locks
     *  as they are (a block's, GrantAhead); null where it would ask none or change them:
     *  inside a locked statement, in a Connect client's block, with nothing to lock, without
     *  a lock client, refused by the engine's mode, or under its session's own locks. */
    static EngineLockClient asking(SparkSession session, JsonNode answer) {
        if (EnclosingLocks.inside(session.sparkContext()) || ConnectBlocks.around(session) != null
                || answer.path(Field.TARGETS).size() == 0) {
            return null;
        }
        EngineLockClient client = LockClients.client(session);
        return client == null || refusesUnbound(session) || SessionLocks.held(session) != null
            ? null : client;
    }

    /** Whether the engine's mode refuses what no LockingSession runs, and {@code session}
     *  has none bound (spark.zklock.engine.mode=refuse). */
    private static boolean refusesUnbound(SparkSession session) {
        return !LockClients.bound(session) && Protocol.Choice.ENGINE_MODE_REFUSE.equals(
            LockClients.setting(session, Protocol.ENGINE_MODE));
    }
}
