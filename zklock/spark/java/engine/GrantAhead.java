// A block's grant asked for ahead of the block, so that the lock client's round trips overlap
// work the caller does meanwhile: a streaming query's micro-batch asks for its locks as Spark
// writes the batch's offsets, and holds them from its sink on (stream/MicroBatch.java). Spark
// writes the offsets, lists the batch's input and plans it first (tens of ms on a local file
// system), so the grant is ready when the sink needs it.
//
// The locks are the block's, unchanged: asked for by the same request the block's entry
// would send (GrantRequest), claimed by that entry, which holds them as any grant; its first
// statement reads the nodes again (a grant asked ahead is older than the statement). A grant
// never claimed is released, as it arrives where it was dropped before: where the block does
// not come (its query stopped or failed before the sink), at once when the thread that asked
// has ended or asks for another, else DROP_AFTER_MS after it came. Hive's Driver takes a
// query's locks after compiling it, on the query's thread; asking ahead only moves the
// request earlier, never the release later than the block's end.
package zklock.engine;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.SparkSession;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Field;

public final class GrantAhead {
    /** Nothing asked ahead: the block asks for its locks as it starts. */
    public static final GrantAhead NONE = new GrantAhead(null, null, null, null);
    /** How long a grant waits for its block before it is released (the block then asks
     *  again, as it would have without it). */
    private static final long DROP_AFTER_MS = 10_000;
    /** How often an unclaimed grant looks whether its block came or its asker ended. */
    private static final long WATCH_NS = TimeUnit.MILLISECONDS.toNanos(20);
    private static final ExecutorService ASKING = Executors.newCachedThreadPool(
        task -> PythonCalls.daemon(task, "zklock-grant-ahead"));
    /** The grant this thread asked for ahead and has not claimed: dropped when it asks for
     *  another (a grant asked for a batch whose sink never came, or for another query's). */
    private static final ThreadLocal<GrantAhead> OUTSTANDING = new ThreadLocal<>();

    private enum State { ASKED, CLAIMED, DROPPED }

    /** A request sent and its answer: the handle the JVM named it by, when it was sent and
     *  when its answer came (System.nanoTime), and the lock client's answer. */
    static final class Asked {
        final String handle;
        final long sent;
        final long answered;
        final JsonNode grant;

        Asked(String handle, long sent, JsonNode grant) {
            this.handle = handle;
            this.sent = sent;
            this.answered = System.nanoTime();
            this.grant = grant;
        }

        boolean granted() {
            return Protocol.Outcome.GRANTED.equals(grant.path(Field.OUTCOME).asText());
        }

        List<String> nodes() {
            List<String> nodes = new ArrayList<>();
            grant.path(Field.NODES).forEach(n -> nodes.add(n.asText()));
            return nodes;
        }
    }

    private final EngineLockClient client;
    private final JsonNode answer;
    private final Thread asker;
    private final CompletableFuture<Asked> asked;
    private final AtomicReference<State> state = new AtomicReference<>(State.ASKED);

    private GrantAhead(EngineLockClient client, JsonNode answer, Thread asker,
                       CompletableFuture<Asked> asked) {
        this.client = client;
        this.answer = answer;
        this.asker = asker;
        this.asked = asked;
    }

    /** {@code answer}'s locks asked for now, for a block that {@code session} runs next on
     *  this thread under the name {@code statement}: NONE where its entry would not ask
     *  {@code session}'s lock client for them as they are (EngineEntry.asking). */
    static GrantAhead ask(SparkSession session, JsonNode answer, String name, String what,
                          String statement) {
        GrantAhead before = OUTSTANDING.get();
        if (before != null) {
            OUTSTANDING.remove();
            before.drop();
        }
        EngineLockClient client = EngineEntry.asking(session, answer);
        if (client == null) {
            return NONE;
        }
        String handle = UUID.randomUUID().toString();
        String request = LockRequests.acquire(session, client, handle, answer, name, what,
            statement);
        CompletableFuture<Asked> asked = new CompletableFuture<>();
        GrantAhead ahead = new GrantAhead(client, answer, Thread.currentThread(), asked);
        ASKING.execute(() -> ahead.run(handle, request));
        OUTSTANDING.set(ahead);
        return ahead;
    }

    /** The lock client's answer, asked for on {@code ASKING}'s thread; then, granted, the
     *  grant kept for its block until claimed, or released. */
    private void run(String handle, String request) {
        long sent = System.nanoTime();
        Asked answered;
        try {
            answered = new Asked(handle, sent, GrantRequest.ask(client, handle, request));
        } catch (Throwable failed) {  // the claimer meets it as its own ask's failure
            asked.completeExceptionally(failed);
            return;
        }
        asked.complete(answered);
        if (!answered.granted()) {
            return;
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(DROP_AFTER_MS);
        while (state.get() == State.ASKED) {
            if (!asker.isAlive() || System.nanoTime() - deadline > 0) {
                state.compareAndSet(State.ASKED, State.DROPPED);
            } else {
                LockSupport.parkNanos(WATCH_NS);
            }
        }
        if (state.get() == State.DROPPED) {
            Releases.later(client, handle, answered.nodes());
        }
    }

    /** The answer asked ahead for {@code answer}'s locks from {@code by}, now the caller's
     *  to hold or release (waiting for it where it is on its way); empty where nothing was
     *  asked for them, or the grant was released meanwhile: the caller asks itself. A
     *  failed ask is thrown as the caller's own would be. The wait goes on whatever
     *  interrupts this thread, as a request asked on it would (PythonCalls: a grant
     *  abandoned half-way would be held by no statement, and its request would go on
     *  waiting, shown by `zklock waits`, after the query had stopped). */
    Optional<Asked> claim(EngineLockClient by, JsonNode answer) {
        if (this == NONE) {
            return Optional.empty();
        }
        if (OUTSTANDING.get() == this) {
            OUTSTANDING.remove();
        }
        if (by != client || !this.answer.equals(answer)) {
            drop();
            return Optional.empty();
        }
        if (!state.compareAndSet(State.ASKED, State.CLAIMED)) {
            return Optional.empty();
        }
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return Optional.of(asked.get());
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (ExecutionException e) {
                    throw EngineRefusal.<RuntimeException>sneaky(e.getCause());
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** Release the grant unless claimed (now, or as it arrives). */
    public void drop() {
        if (this != NONE) {
            state.compareAndSet(State.ASKED, State.DROPPED);
        }
    }
}
