// The locks a statement runs inside of, and whether they cover it. Inside a locked statement
// (one the engine locked whose command runs others, as a CTAS runs its insert; or a block the
// engine holds for zklock's Python, EngineEntry.enterBlock), that statement's locks cover it.
// They travel with the execution as the local properties zklock's committers read
// (CommitFence.ZOOKEEPER and NODES, set with the fencing token), and are checked to still
// exist, as the fenced commit checks them (a lock whose node is gone is lost, whoever removed
// it); a block's, also to cover the statement; a Spark Connect client's (its operation tag,
// which a client could forge), by the lock client, to be lock nodes that cover it.
package zklock.engine;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Field;
import zklock.commit.CommitFence;
import zklock.planner.LockAnswer;

final class EnclosingLocks {
    /** The local property naming this engine's grant whose nodes are in CommitFence's: a
     *  statement's (its nested executions are the statement's own) or a block's (what it
     *  covers is checked). */
    private static final String ENGINE_HELD = "zklock.engine.held";
    /** The blocks the engine holds (EngineEntry.enterBlock, a statement under its session's
     *  locks), by handle: the statements a block runs are covered only by what it holds. */
    private static final Map<String, EngineGuard> BLOCKS = new ConcurrentHashMap<>();

    private EnclosingLocks() {
    }

    /** Lock nodes a statement runs inside of, and who claims them. */
    private static final class Claim {
        final String zookeeper;
        final List<String> nodes;
        /** Nodes a client holds (zklock's Python, a Connect client), not this engine. */
        final boolean byClient;

        Claim(String zookeeper, List<String> nodes, boolean byClient) {
            this.zookeeper = zookeeper;
            this.nodes = nodes;
            this.byClient = byClient;
        }
    }

    /** Does this execution run inside a locked statement? Then its locks cover it, once
     *  checked (else EngineRefusal): the engine's own statement's, to still exist; a
     *  block's, also to cover what {@code planned} needs; a client's, to be lock nodes that
     *  exist (read by the lock client, with no lock client here only checked to exist), and,
     *  read, to cover it. */
    static boolean cover(SparkSession session, Supplier<JsonNode> planned) {
        SparkContext sc = session.sparkContext();
        Claim claim = heldHere(sc) ? engineClaim(sc, planned) : connectClaim(sc);
        if (claim == null) {
            return false;
        }
        EngineLockClient client = claim.byClient ? LockClients.client(session) : null;
        if (client != null) {
            verify(client, planned.get(), claim.nodes);
            return true;
        }
        if (claim.nodes.isEmpty()) {
            throw EngineRefusal.refused("zklock: a locked statement named no lock nodes; it"
                + " does not run");
        }
        try {
            CommitFence.exist(claim.zookeeper, claim.nodes);
        } catch (IOException e) {
            throw EngineRefusal.raise(EngineRefusal.of(Protocol.Outcome.LOST, e.getMessage(), e));
        }
        return true;
    }

    /** The nodes in this thread's local properties; a block's checked to cover
     *  {@code planned} (a block holding S on a table does not cover a write to it). */
    private static Claim engineClaim(SparkContext sc, Supplier<JsonNode> planned) {
        String engineHeld = sc.getLocalProperty(ENGINE_HELD);
        EngineGuard block = engineHeld == null ? null : BLOCKS.get(engineHeld);
        if (block != null) {
            refuseUncovered(block.heldAnswer(), planned.get(), "the block's locks");
        }
        return new Claim(sc.getLocalProperty(CommitFence.ZOOKEEPER),
            Arrays.asList(sc.getLocalProperty(CommitFence.NODES).split("\n")),
            engineHeld == null);
    }

    /** The nodes a Spark Connect client's operation tag names; null without one. */
    private static Claim connectClaim(SparkContext sc) {
        JsonNode fence = ConnectTags.fence(sc);
        if (fence == null) {
            return null;
        }
        List<String> nodes = new ArrayList<>();
        fence.path(Field.NODES).forEach(n -> nodes.add(n.asText()));
        return new Claim(fence.path(Field.ZOOKEEPER).asText(), nodes, true);
    }

    /** The lock client's reading of a client's claimed {@code nodes} (lock nodes of its
     *  root that exist), checked to cover {@code answer}; else its refusal, raised. */
    private static void verify(EngineLockClient client, JsonNode answer, List<String> nodes) {
        Map<String, Object> claim = new LinkedHashMap<>();
        claim.put(Field.VERSION, Protocol.Version.ENGINE);
        claim.put(Field.NODES, nodes);
        JsonNode held = Documents.lockAnswer(client.claim(Documents.write(claim)));
        String outcome = held.path(Field.OUTCOME).asText();
        if (!Protocol.Outcome.CLAIMED.equals(outcome)) {
            throw EngineRefusal.raise(EngineRefusal.of(outcome,
                held.path(Field.MESSAGE).asText("zklock: claim refused"), null));
        }
        refuseUncovered(held.path(Field.ANSWER), answer, "the statement's locks");
    }

    /** Refuse a statement whose {@code answer} {@code held} does not cover (the cover rule:
     *  LockAnswer.uncovered), naming what it lacks. */
    private static void refuseUncovered(JsonNode held, JsonNode answer, String whose) {
        JsonNode missing = LockAnswer.uncovered(held, answer);
        if (missing != null) {
            throw EngineRefusal.refused("zklock: " + whose + " do not cover "
                + StatementPlans.describe(Documents.JSON.createArrayNode().add(missing))
                + " in " + missing.path(Field.MODE).asText() + ": the statement does not run");
        }
    }

    /** Let this thread's statements run inside {@code guard}'s locks: its nodes and token in
     *  the local properties its committers and nested statements read. */
    static void enter(SparkContext sc, EngineGuard guard) {
        sc.setLocalProperty(Protocol.Property.FENCING_TOKEN, guard.token());
        sc.setLocalProperty(CommitFence.ZOOKEEPER, guard.zookeeper());
        sc.setLocalProperty(CommitFence.NODES, String.join("\n", guard.nodes()));
        sc.setLocalProperty(ENGINE_HELD, guard.key());
    }

    /** Let {@code guard} cover what a block covers: only what its locks cover. */
    static void asBlock(EngineGuard guard) {
        BLOCKS.put(guard.key(), guard);
    }

    /** This thread's statements no longer run inside {@code guard}'s locks. */
    static void leave(SparkContext sc, EngineGuard guard) {
        BLOCKS.remove(guard.key());
        clear(sc);
    }

    /** Clear the local properties (the thread's later statements see no locks). */
    static void clear(SparkContext sc) {
        sc.setLocalProperty(Protocol.Property.FENCING_TOKEN, null);
        sc.setLocalProperty(CommitFence.ZOOKEEPER, null);
        sc.setLocalProperty(CommitFence.NODES, null);
        sc.setLocalProperty(ENGINE_HELD, null);
    }

    /** Set the nodes this thread's commits are fenced on (a statement under its session's
     *  locks too: theirs added). */
    static void fenceOn(SparkContext sc, List<String> nodes) {
        sc.setLocalProperty(CommitFence.NODES, String.join("\n", nodes));
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
    static boolean inside(SparkContext sc) {
        return heldHere(sc) || ConnectTags.fence(sc) != null;
    }

    /** Does this thread run under locks a client took for it (a Spark Connect LockingSession's
     *  statement, a block zklock's Python holds), rather than under this engine's own grant
     *  for the statement around it? Its reads are then listed again as of those locks. */
    static boolean underClaim(SparkContext sc) {
        return heldHere(sc) ? sc.getLocalProperty(ENGINE_HELD) == null
            : ConnectTags.fence(sc) != null;
    }

    /** Do the local properties carry a locked statement's nodes (set by zklock here)? */
    private static boolean heldHere(SparkContext sc) {
        String zookeeper = sc.getLocalProperty(CommitFence.ZOOKEEPER);
        String nodes = sc.getLocalProperty(CommitFence.NODES);
        return zookeeper != null && !zookeeper.isEmpty() && nodes != null && !nodes.isEmpty();
    }
}
