// The grant a statement holds under zklock's engine extension, from its entry (EngineEntry)
// to its end: its lock nodes, fencing token and job tag, its figures, and its end. At its end
// its set is released, after it returns where its nodes were there throughout (Releases), and
// a loss or failure is translated for its caller (EngineFailures). A session's own lock
// (LOCK TABLE, a pipeline run's TRUNCATE) is a guard held for the session instead
// (SessionLocks), released at UNLOCK or at the session's end.
package zklock.engine;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.SparkContext;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Field;
import zklock.Protocol.Mode;
import zklock.commit.CommitFence;
import zklock.commit.WriteOutcome;

final class EngineGuard {
    /** Job tags this thread left on its later jobs (detach): removed at its next statement. */
    private static final ThreadLocal<List<String>> LEFT_TAGS =
        ThreadLocal.withInitial(ArrayList::new);
    /** The guard of a statement that holds nothing of its own: covered, or nothing to
     *  lock. */
    static final EngineGuard COVERED =
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
    /** The job tags of the locks it runs under too (its session's, SessionLocks; a Connect
     *  client's block): removed with its own. */
    private List<String> sessionTags = Collections.emptyList();
    /** Whose locks those are, for the message naming their loss. */
    private String enclosing = "the session's locks (LOCK TABLE)";
    /** The tables where its node was alone when granted (FreshListings.Version). */
    private Map<String, FreshListings.Version> sole = Collections.emptyMap();
    /** Whether its grant was asked for ahead of its statement (GrantAhead): its read of the
     *  nodes is older than the statement. */
    private boolean askedAhead;

    /** The guard of {@code client}'s grant under {@code handle}: {@code held}'s locks, the
     *  lock nodes {@code nodes} in {@code zookeeper} fenced with {@code token}, its jobs
     *  tagged {@code jobTag}. */
    EngineGuard(EngineLockClient client, String handle, String jobTag, SparkContext sc,
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

    /** Release locks held for a session ({@code whose}: a session's own lock, SessionLocks,
     *  at UNLOCK TABLE or the session's end; a Connect client's block, ConnectBlocks): null,
     *  or the refusal that names their loss while they were held. */
    EngineRefusal releaseForSession(String whose) {
        if (client == null) {
            return null;
        }
        String gone = goneAtEnd();  // (ZooKeeper's word: its client may not know yet)
        JsonNode answer = Documents.lockAnswer(client.release(handle, false));
        if (gone == null && !Protocol.Outcome.LOST.equals(answer.path(Field.OUTCOME).asText())) {
            return null;
        }
        figures.lost();
        return EngineRefusal.of(Protocol.Outcome.LOST, "zklock: " + whose + " on "
            + StatementPlans.describe(held.path(Field.TARGETS)) + " were lost while held ("
            + (gone != null ? gone
                : answer.path(Field.MESSAGE).asText(Protocol.Message.UNKNOWN_LOSS)) + ")", null);
    }

    /** Run also under its session's locks: their nodes in what its commits are fenced on,
     *  their job tags on its jobs. */
    void alsoUnder(SessionLocks.Held own) {
        List<String> fenced = new ArrayList<>(nodes);
        fenced.addAll(own.nodes());
        EnclosingLocks.fenceOn(sc, fenced);
        runsUnder(own.jobTags(), enclosing);
    }

    /** Run under {@code whose} locks too, whose jobs are tagged {@code tags}: its jobs
     *  tagged theirs as well, cancelled with theirs. */
    void runsUnder(List<String> tags, String whose) {
        sessionTags = tags;
        enclosing = whose;
        sessionTags.forEach(sc::addJobTag);
    }

    /** Held for its session from now (SessionLocks), not for this thread's statement: the
     *  thread's jobs and local properties are left as they were before it. */
    void heldForSession() {
        WriteOutcome.end();
        sc.removeJobTag(jobTag);
        EnclosingLocks.clear(sc);
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

    /** Its grant was asked for ahead of its statement (GrantAhead). */
    void askedAhead() {
        askedAhead = true;
    }

    /** Was its grant's read of its nodes made just now, for this statement: not asked
     *  ahead, so that its first statement may rely on it (EnclosingLocks.runsNext)? */
    boolean readJustNow() {
        return holds() && !askedAhead;
    }

    /** Its figures: waits, attempts, objects, times. */
    GrantFigures figures() {
        return figures;
    }

    /** The tables where its node was alone when granted (FreshListings.versions). */
    void soleIn(Map<String, FreshListings.Version> tables) {
        sole = tables;
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
            if (handle != null) {  // under locks held for longer (EngineEntry.under): they stay
                WriteOutcome.end();
                EnclosingLocks.leave(sc, this);
                LEFT_TAGS.get().addAll(sessionTags);
            }
            return;
        }
        EnclosingLocks.clear(sc);
        LEFT_TAGS.get().add(jobTag);
        LEFT_TAGS.get().addAll(sessionTags);
    }

    /** Release a detached guard's set (any thread; once): queued, as a returned
     *  statement's is (Releases), so that its client's next request carries it. */
    void releaseDetached() {
        if (client != null && released.compareAndSet(false, true)) {
            Releases.later(client, handle, nodes);
        }
    }

    /** Remove the job tags this thread left on its later jobs (detach). */
    static void removeLeftTags(SparkContext sc) {
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
        if (gone != null && !Protocol.Outcome.LOST.equals(answer.path(Field.OUTCOME).asText())) {
            // ZooKeeper says so before the client may know: the loss is ZooKeeper's word
            answer = Documents.JSON.createObjectNode().put(Field.OUTCOME, Protocol.Outcome.LOST)
                .put(Field.MESSAGE, gone).set(Field.OBJECTS, answer.path(Field.OBJECTS));
        }
        if (refused != null || Protocol.Outcome.LOST.equals(answer.path(Field.OUTCOME).asText())) {
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
            return Documents.JSON.createObjectNode().put(Field.OUTCOME, Protocol.Outcome.LOST)
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
        return EngineFailures.lost(command, enclosing + ": " + gone,
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
            if (Mode.EXCLUSIVE.equals(t.path(Field.MODE).asText())) {
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
