// A Spark Connect client's block (a LockingSession's holding(), a SQL script it runs whole),
// held by the server's engine as a classic session's block is: the client asks zklock's
// plugin to hold the block's locks (ConnectLockPlugin, "hold"), the server's lock client takes
// them as a statement's (waiting, or refused, as a statement would be), and the engine keeps
// them for the client's Spark Connect session until the client releases them ("release") or
// the session ends. The client's operations inside the block carry its id as an operation tag
// (Protocol.Tag.BLOCK); each statement they run is covered where the block's locks cover it
// and refused where they do not (the cover rule: LockAnswer.uncovered), its commits are fenced
// on the block's nodes, and its jobs are cancelled with the block's when they are lost.
//
// A tag is only a name: a block is found among those this server holds for the statement's
// own session, so a client cannot run under locks it does not hold (another session's block,
// a released one, a forged id: refused).
//
// A block lives as long as its client: the client renews it ("renew") while it runs, and a
// block not renewed within its time to live (the client's, three of its ZooKeeper session
// timeouts) is released, its running jobs cancelled, as a client-held set would have been lost
// with the client's ZooKeeper session. Spark Connect ends an abandoned session only after an
// hour; a dead client's block must not hold its tables that long.
package zklock.engine;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.SparkSession;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.commit.CommitFence;

public final class ConnectBlocks {
    /** The blocks held for Connect clients, by id (the grant's handle). */
    private static final Map<String, Block> HELD = new ConcurrentHashMap<>();
    /** Blocks released because their client stopped renewing them, with why (the newest
     *  thousand): the client's release then learns they were lost. */
    private static final Map<String, String> EXPIRED = Recent.map(1000);
    /** Releases the blocks whose client stopped renewing them (started with the first). */
    private static ScheduledExecutorService reaper;

    private ConnectBlocks() {
    }

    /** One client's block: the grant, held for the session that asked for it. */
    static final class Block {
        final EngineGuard guard;
        final SparkSession session;
        /** The Connect session whose end releases it (SessionEnds); null if none is heard. */
        final String ends;
        /** How long it lives without a renewal from its client. */
        final long ttlNanos;
        /** When its client last renewed it (System.nanoTime). */
        volatile long renewed = System.nanoTime();

        Block(EngineGuard guard, SparkSession session, String ends, long ttlMs) {
            this.guard = guard;
            this.session = session;
            this.ends = ends;
            this.ttlNanos = TimeUnit.MILLISECONDS.toNanos(ttlMs);
        }
    }

    /** Hold {@code answer}'s locks (the planner's answer to the block's statements) for
     *  {@code session}'s block, whose statement is {@code statement}: the block's id, or ""
     *  when nothing is held (nothing to lock, locking off). It lives {@code ttlMs} without a
     *  renewal. Denied or refused as a statement is (EngineRefusal). */
    public static String hold(SparkSession session, String answer, String statement,
                              long ttlMs) {
        if (EnclosingLocks.inside(session.sparkContext()) || around(session) != null) {
            throw EngineRefusal.refused("zklock: refused a block inside a locked statement or"
                + " block: the block around it holds its locks");
        }
        EngineGuard guard = EngineEntry.enterForSession(session, StatementPlans.answer(answer),
            "the block",
            statement + " (a Spark Connect client's block)");
        if (!guard.holds()) {
            return "";
        }
        String ends = SessionEnds.current(session);
        HELD.put(guard.key(), new Block(guard, session, ends, Math.max(ttlMs, 1000)));
        startReaper();
        if (ends != null && SessionEnds.hasEnded(ends)) {
            ended(ends);
            throw EngineRefusal.refused("zklock: the Spark Connect session ended while its"
                + " block's locks were taken; released, and the block does not run");
        }
        return guard.key();
    }

    /** The lock nodes of block {@code id} (none for a block that holds nothing). */
    public static List<String> nodes(String id) {
        Block block = HELD.get(id);
        return block == null ? new ArrayList<>() : block.guard.nodes();
    }

    /** Its client still runs {@code session}'s block {@code id}: it lives another time to
     *  live. Throws the refusal naming its loss when it is no longer held. */
    public static void renew(SparkSession session, String id) {
        mine(session, id).renewed = System.nanoTime();
    }

    /** Release {@code session}'s block {@code id}, cancelling what still runs in it (an
     *  operation its client stopped waiting for); throws the refusal naming their loss
     *  (EngineRefusal, lost) when its locks were lost while it held them. */
    public static void release(SparkSession session, String id) {
        Block block = mine(session, id);
        if (!HELD.remove(id, block)) {  // the reaper, or the session's end, came first
            throw notHeld(id);
        }
        EngineRefusal lost = end(block);
        if (lost != null) {
            throw EngineRefusal.raise(lost);
        }
    }

    /** End {@code block}, removed from HELD: its running jobs cancelled, its locks released;
     *  the refusal naming their loss while held, else null. */
    private static EngineRefusal end(Block block) {
        LostJobs.cancel(block.session.sparkContext(), block.guard.jobTag());
        return block.guard.releaseForSession("the block's locks");
    }

    /** {@code session}'s block {@code id}; else the refusal naming why it is not held. */
    private static Block mine(SparkSession session, String id) {
        Block block = HELD.get(id);
        if (block != null && block.session == session) {
            return block;
        }
        throw notHeld(id);
    }

    /** Why block {@code id} is not held: lost, where it was released without its client
     *  (expired, its session ended); else refused (released, another session's, unknown). */
    private static RuntimeException notHeld(String id) {
        String ended = EXPIRED.get(id);
        if (ended != null) {
            return EngineRefusal.raise(EngineRefusal.of(Protocol.Outcome.LOST, ended, null));
        }
        return EngineRefusal.refused("zklock: this Spark Connect session holds no block " + id
            + " (released, lost or never granted): the statement does not run");
    }

    private static synchronized void startReaper() {
        if (reaper != null) {
            return;
        }
        reaper = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "zklock-connect-blocks");
            t.setDaemon(true);
            return t;
        });
        reaper.scheduleWithFixedDelay(ConnectBlocks::expire, 1, 1, TimeUnit.SECONDS);
    }

    /** Release the blocks whose client has not renewed them within their time to live,
     *  cancelling the jobs that still run in them. Nothing stops the reaper: a failure is
     *  said, and the next round goes on. */
    private static void expire() {
        long now = System.nanoTime();
        HELD.forEach((id, block) -> {
            if (now - block.renewed > block.ttlNanos && HELD.remove(id, block)) {
                try {
                    expire(id, block);
                } catch (Throwable e) {  // (a scheduled task that throws never runs again)
                    System.err.println("zklock: releasing expired block " + id + ": " + e);
                }
            }
        });
    }

    /** Release block {@code id}, which its client stopped renewing: its jobs cancelled, its
     *  client's release told why. */
    private static void expire(String id, Block block) {
        String why = "zklock: the block's locks on " + StatementPlans.describe(
            block.guard.heldAnswer().path(Protocol.Field.TARGETS)) + " were released: its"
            + " Spark Connect client did not renew them for "
            + TimeUnit.NANOSECONDS.toSeconds(block.ttlNanos) + " s";
        EXPIRED.put(id, why);
        end(block);
        System.err.println(why);
    }

    /** Release every block held for the Connect session whose end is {@code ends}. */
    static void ended(String ends) {
        List<Block> done = new ArrayList<>();
        HELD.forEach((id, block) -> {
            if (ends.equals(block.ends) && HELD.remove(id, block)) {
                EXPIRED.put(id, "zklock: the block's locks were released: its Spark Connect"
                    + " session ended");
                done.add(block);
            }
        });
        for (Block block : done) {
            EngineRefusal lost = end(block);
            if (lost != null) {
                System.err.println(lost.getMessage() + "; its session has ended");
            }
        }
    }

    /** The block this thread's Connect operation runs in (its tag names it): null outside
     *  one; refused when the tag names no block this server holds for {@code session}. */
    static Block around(SparkSession session) {
        String id = ConnectTags.block(session.sparkContext());
        if (id == null) {
            return null;
        }
        return mine(session, id);
    }

    /** Run a statement of {@code block} that needs {@code planned}: refused unless the
     *  block's locks cover it, or when they are gone; else under them (EngineEntry.under). */
    static EngineGuard under(SparkSession session, Block block, JsonNode planned) {
        EngineGuard held = block.guard;
        EnclosingLocks.refuseUncovered(held.heldAnswer(), planned, "the block's locks");
        try {
            CommitFence.exist(held.zookeeper(), held.nodes());
        } catch (IOException e) {
            throw EngineRefusal.raise(EngineRefusal.of(Protocol.Outcome.LOST,
                "zklock: the block's locks are lost: " + e.getMessage(), e));
        }
        List<String> tags = new ArrayList<>();
        tags.add(held.jobTag());
        return EngineEntry.under(session, held.nodes(), held.zookeeper(), held.token(),
            held.heldAnswer(), tags, "the block's locks");
    }
}
