package zklock.commit;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkContext$;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

import zklock.Protocol;

/**
 * The fence of zklock's committers: a job whose locks were lost never commits.
 *
 * <p>A lost lock cancels the statement's Spark jobs, but a cancel can lose the race with
 * the job commit, which runs on the driver after the last task. So commitJob, as the last
 * thing before files become visible, asks ZooKeeper whether every lock node of the
 * statement's lock set still exists, and throws (the job then aborts, removing only its
 * own staging) if one is gone or ZooKeeper cannot answer within {@link #timeoutMs}
 * (spark.zklock.fence.timeoutMs).
 *
 * <p>Job commit runs on the driver thread that ran the action, so it sees the Spark local
 * properties the statement set (zklock/spark/locked_statement.py): {@link #ZOOKEEPER}, the connect
 * string with its chroot, and {@link #NODES}, the full node paths, one per line. Without
 * them (a write not under zklock) nothing is checked.
 *
 * <p>One round trip: a sync then an exists per node, pipelined on one session (ZooKeeper
 * answers a session's requests in order, so the exists calls see at least the state of
 * the leader when the sync reached it, even on a lagging follower). Neither sync nor
 * exists is subject to ZooKeeper's ACLs (it checks ACLs on reading a node's data or
 * children, never on asking whether it exists), so the check needs no credentials and
 * passes on a root closed by zklock's digest ACLs; a server that refuses unauthenticated
 * clients altogether (enforced SASL) fails the check, closed. One client per connect
 * string is kept for the life of the JVM and replaced once its session is gone.
 */
public final class CommitFence {
    /** Local property: the ZooKeeper connect string (with chroot) of the statement's locks. */
    public static final String ZOOKEEPER = Protocol.Property.FENCE_ZOOKEEPER;
    /** Local property: the full paths of the statement's lock nodes, one per line. */
    public static final String NODES = Protocol.Property.FENCE_NODES;
    /** How every refusal's message begins (zklock/spark/locked_statement.py looks for it). */
    public static final String REFUSED = Protocol.Fence.REFUSED;
    /** Session timeout of the fence's own client (it holds no ephemeral nodes). */
    private static final int SESSION_MS = 30000;
    private static final ConcurrentHashMap<String, ZooKeeper> CLIENTS = new ConcurrentHashMap<>();
    /** Nodes whose holder this JVM knows is gone (ChildLockClient: the lock client died),
     *  with why: ZooKeeper keeps them until the holder's session expires, and no commit may
     *  rely on them meanwhile. Sequential node paths are never reused. */
    private static final ConcurrentHashMap<String, String> ABANDONED = new ConcurrentHashMap<>();

    private CommitFence() {
    }

    /** How long a check waits for ZooKeeper before refusing the commit (fail closed): the
     *  application's setting. */
    static long timeoutMs() {
        SparkContext sc = SparkContext$.MODULE$.getActive().getOrElse(() -> null);
        return Protocol.FENCE_TIMEOUT_MS.number(sc == null ? null
            : sc.getConf().get(Protocol.FENCE_TIMEOUT_MS.key, null));
    }

    /** Called by the committers' commitJob: throws unless the statement's locks are held. */
    public static void check() throws IOException {
        SparkContext sc = SparkContext$.MODULE$.getActive().getOrElse(() -> null);
        if (sc == null) {
            return;
        }
        String connect = sc.getLocalProperty(ZOOKEEPER);
        String nodes = sc.getLocalProperty(NODES);
        if (connect == null || connect.isEmpty() || nodes == null || nodes.isEmpty()) {
            return;
        }
        check(connect, Arrays.asList(nodes.split("\n")));
    }

    /** Throws an IOException starting with {@link #REFUSED} unless every node exists. */
    public static void check(String connect, List<String> nodes) throws IOException {
        check(connect, nodes, true);
    }

    /**
     * The same check without the sync: one read round trip, answered by whichever server the
     * client is connected to, which may lag the leader by a few milliseconds. zklock's engine
     * checks a statement's locks so before each command (EngineGuard.java); the job commit,
     * after which files are visible, keeps the sync.
     */
    public static void exist(String connect, List<String> nodes) throws IOException {
        check(connect, nodes, false);
    }

    /** The holder of {@code nodes} is gone ({@code why}): every later check of them fails. */
    public static void abandon(List<String> nodes, String why) {
        for (String node : nodes) {
            ABANDONED.put(node, why);
        }
    }

    private static void check(String connect, List<String> nodes, boolean sync)
            throws IOException {
        for (String node : nodes) {
            String why = ABANDONED.get(node);
            if (why != null) {
                throw new IOException(REFUSED + " (" + node + ": " + why + ")");
            }
        }
        Answers answers = new Answers(nodes.size() + (sync ? 1 : 0));
        ZooKeeper zk = client(connect);
        if (sync) {
            zk.sync(nodes.get(0), (rc, path, ctx) -> answers.synced(rc), null);
        }
        for (String node : nodes) {
            zk.exists(node, false, (rc, path, ctx, stat) -> answers.exists(rc, path, stat), null);
        }
        answers.await(connect, zk);
        if (!answers.gone.isEmpty()) {
            throw new IOException(REFUSED + " (" + answers.gone.size() + " of " + nodes.size()
                    + " lock nodes gone, e.g. " + answers.gone.get(0) + ")");
        }
    }

    /** ZooKeeper's answers to one check's pipelined requests, as they come. */
    private static final class Answers {
        final List<String> gone = Collections.synchronizedList(new ArrayList<>());
        final AtomicReference<String> error = new AtomicReference<>();
        final CountDownLatch answered;

        Answers(int requests) {
            answered = new CountDownLatch(requests);
        }

        void synced(int rc) {
            failed(rc);
            answered.countDown();
        }

        void exists(int rc, String path, Stat stat) {
            if (rc == KeeperException.Code.NONODE.intValue()
                    || (rc == KeeperException.Code.OK.intValue() && stat == null)) {
                gone.add(path);
            } else {
                failed(rc);
            }
            answered.countDown();
        }

        private void failed(int rc) {
            if (rc != KeeperException.Code.OK.intValue()) {
                error.compareAndSet(null, KeeperException.Code.get(rc).name());
            }
        }

        /** Every answer, within the fence's timeout; else, or on ZooKeeper's error, the
         *  check refused (and {@code zk}, the client for {@code connect}, forgotten). */
        void await(String connect, ZooKeeper zk) throws IOException {
            try {
                long timeout = timeoutMs();
                if (!answered.await(timeout, TimeUnit.MILLISECONDS)) {
                    forget(connect, zk);
                    throw new IOException(REFUSED + " (ZooKeeper at " + connect
                            + " did not answer within " + timeout + " ms)");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new InterruptedIOException(REFUSED + " (interrupted while checking)");
            }
            if (error.get() != null) {
                forget(connect, zk);
                throw new IOException(REFUSED + " (ZooKeeper at " + connect + ": " + error.get()
                        + ")");
            }
        }
    }

    /** The JVM's client for this connect string, connecting (in the background) if needed. */
    private static ZooKeeper client(String connect) throws IOException {
        ZooKeeper zk = CLIENTS.get(connect);
        if (zk != null && zk.getState().isAlive()) {
            return zk;
        }
        synchronized (CLIENTS) {
            zk = CLIENTS.get(connect);
            if (zk == null || !zk.getState().isAlive()) {
                try {
                    zk = new ZooKeeper(connect, SESSION_MS, event -> { });
                } catch (IOException | IllegalArgumentException e) {
                    throw new IOException(REFUSED + " (cannot connect to ZooKeeper at "
                            + connect + ": " + e.getMessage() + ")", e);
                }
                CLIENTS.put(connect, zk);
            }
            return zk;
        }
    }

    /** Drop a client whose session is gone, so that the next check starts a new one. */
    private static void forget(String connect, ZooKeeper zk) {
        if (!zk.getState().isAlive()) {
            CLIENTS.remove(connect, zk);
        }
    }
}
