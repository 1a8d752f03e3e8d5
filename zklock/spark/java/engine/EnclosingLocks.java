// The locks a statement runs inside of, and whether they cover it. Inside a locked statement
// (one the engine locked whose command runs others, as a CTAS runs its insert; or a block the
// engine holds for zklock's Python, EngineEntry.enterBlock), that statement's locks cover it.
// They travel with the execution as the local properties zklock's committers read
// (CommitFence.ZOOKEEPER and NODES, set with the fencing token), and are checked to still
// exist, as the fenced commit checks them (a lock whose node is gone is lost, whoever removed
// it); a block's, also to cover the statement (a Spark Connect client's block: ConnectBlocks).
package zklock.engine;

import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
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
    /** The blocks whose first statement runs right after their grant, on the grant's thread
     *  (Block.hold: a micro-batch's write, an insert_once batch), by handle: that statement's
     *  check that the nodes still exist is the grant's own (the nodes were created and the
     *  set read a moment before), as a statement's own grant is; its commit's fence checks
     *  them again. */
    private static final Set<String> JUST_GRANTED = ConcurrentHashMap.newKeySet();

    private EnclosingLocks() {
    }

    /** Does this execution run inside a locked statement? Then its locks cover it, once
     *  checked (else EngineRefusal): the engine's own statement's, to still exist; a
     *  block's, also to cover what {@code planned} needs. */
    static boolean cover(SparkSession session, Supplier<JsonNode> planned) {
        SparkContext sc = session.sparkContext();
        if (!heldHere(sc)) {
            return false;
        }
        String engineHeld = sc.getLocalProperty(ENGINE_HELD);
        EngineGuard block = engineHeld == null ? null : BLOCKS.get(engineHeld);
        if (block != null) {  // a block holding S on a table does not cover a write to it
            refuseUncovered(block.heldAnswer(), planned.get(), "the block's locks");
        }
        if (engineHeld != null && JUST_GRANTED.remove(engineHeld)) {
            return true;
        }
        String zookeeper = sc.getLocalProperty(CommitFence.ZOOKEEPER);
        List<String> nodes = Arrays.asList(sc.getLocalProperty(CommitFence.NODES).split("\n"));
        try {
            CommitFence.exist(zookeeper, nodes);
        } catch (IOException e) {
            throw EngineRefusal.raise(EngineRefusal.of(Protocol.Outcome.LOST, e.getMessage(), e));
        }
        return true;
    }

    /** Refuse a statement whose {@code answer} {@code held} does not cover (the cover rule:
     *  LockAnswer.uncovered), naming what it lacks. */
    static void refuseUncovered(JsonNode held, JsonNode answer, String whose) {
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

    /** {@code block}'s first statement runs next, on this thread, with nothing between it
     *  and the grant: its nodes are not read again before it runs (JUST_GRANTED). */
    static void runsNext(EngineGuard block) {
        JUST_GRANTED.add(block.key());
    }

    /** This thread's statements no longer run inside {@code guard}'s locks. */
    static void leave(SparkContext sc, EngineGuard guard) {
        BLOCKS.remove(guard.key());
        JUST_GRANTED.remove(guard.key());
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
     *  local properties) or a Spark Connect client's block (its operation tag)? */
    static boolean inside(SparkContext sc) {
        return heldHere(sc) || ConnectTags.block(sc) != null;
    }

    /** Does this thread run in a block a Spark Connect client holds (ConnectBlocks), whose
     *  grant was not this statement's? Its reads are then listed again as of its locks. */
    static boolean inClientBlock(SparkContext sc) {
        return ConnectTags.block(sc) != null;
    }

    /** Do the local properties carry a locked statement's nodes (set by zklock here)? */
    private static boolean heldHere(SparkContext sc) {
        String zookeeper = sc.getLocalProperty(CommitFence.ZOOKEEPER);
        String nodes = sc.getLocalProperty(CommitFence.NODES);
        return zookeeper != null && !zookeeper.isEmpty() && nodes != null && !nodes.isEmpty();
    }
}
