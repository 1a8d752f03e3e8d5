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
// has ended or asks for another, else DROP_AFTER_MS after it came. A request still waiting
// for a holder when it is dropped, or when its claimer is interrupted (the query stopped), is
// cancelled: it waits no more, and the query stops at once. Hive's Driver takes a query's
// locks after compiling it, on the query's thread, and stops waiting when that thread is
// interrupted; asking ahead only moves the request earlier, never the release later than the
// block's end. A statement's request asked as it runs (now) is waited for the same way, so an
// interrupted statement stops waiting too.
package zklock.engine;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.function.BooleanSupplier;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.SparkSession;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Field;

public final class GrantAhead {
    /** Nothing asked ahead: the block asks for its locks as it starts. */
    public static final GrantAhead NONE = new GrantAhead(null, null, null, null, null);
    /** How long a grant waits for its block before it is released (the block then asks
     *  again, as it would have without it). */
    private static final long DROP_AFTER_MS = 10_000;
    /** How often a grant not yet claimed is looked at: whether its block came, its asker
     *  ended or it was dropped. */
    private static final long WATCH_MS = 20;
    private static final Logger LOG = LoggerFactory.getLogger(GrantAhead.class);
    private static final ExecutorService ASKING = Executors.newCachedThreadPool(
        task -> PythonCalls.daemon(task, "zklock-grant-ahead"));
    /** One thread watches every grant not yet claimed. */
    private static final ScheduledExecutorService WATCHING =
        Executors.newSingleThreadScheduledExecutor(
            task -> PythonCalls.daemon(task, "zklock-grant-ahead-watch"));
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
    private final String handle;
    private final Thread asker;
    /** Whether the block will not come after all (its query was stopped). */
    private final BooleanSupplier stopped;
    private final CompletableFuture<Asked> asked = new CompletableFuture<>();
    private final AtomicReference<State> state = new AtomicReference<>(State.ASKED);
    private final AtomicBoolean cancelled = new AtomicBoolean();

    private GrantAhead(EngineLockClient client, JsonNode answer, String handle, Thread asker,
                       BooleanSupplier stopped) {
        this.client = client;
        this.answer = answer;
        this.handle = handle;
        this.asker = asker;
        this.stopped = stopped;
    }

    /** {@code answer}'s locks asked for now, for a block that {@code session} runs next on
     *  this thread under the name {@code statement}, unless {@code stopped} says it will not
     *  come after all: NONE where its entry would not ask {@code session}'s lock client for
     *  them as they are (EngineEntry.asking). */
    static GrantAhead ask(SparkSession session, JsonNode answer, String name, String what,
                          String statement, BooleanSupplier stopped) {
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
        GrantAhead ahead = new GrantAhead(client, answer, handle, Thread.currentThread(),
            stopped);
        ASKING.execute(() -> ahead.run(request));
        ahead.watchLater();
        OUTSTANDING.set(ahead);
        return ahead;
    }

    /** {@code request}, for {@code answer}'s locks under {@code handle}, asked for now and
     *  its answer waited for on this thread as a claimed grant's is: an interruption of the
     *  wait (Spark Connect's interrupt of an operation, the Thrift server's cancel of a
     *  statement) cancels the request, and is thrown once it answered, a grant that came
     *  first released. The lock client's own call is never interrupted: a grant abandoned
     *  half-way would be held by no statement. A block this asked ahead for (a micro-batch
     *  asking again: its plan changed, or it waited and was planned again) stops waiting
     *  when its query stops too, as its claim does. */
    Asked now(EngineLockClient client, JsonNode answer, String handle, String request) {
        GrantAhead asking = new GrantAhead(client, answer, handle, Thread.currentThread(),
            this == NONE ? () -> false : stopped);
        asking.state.set(State.CLAIMED);
        ASKING.execute(() -> asking.run(request));
        return asking.answered();
    }

    /** The lock client's answer, asked for on {@code ASKING}'s thread. */
    private void run(String request) {
        long sent = System.nanoTime();
        try {
            asked.complete(new Asked(handle, sent, GrantRequest.ask(client, handle, request)));
        } catch (Throwable failed) {  // the claimer meets it as its own ask's failure
            asked.completeExceptionally(failed);
        }
    }

    private void watchLater() {
        WATCHING.schedule(this::watch, WATCH_MS, TimeUnit.MILLISECONDS);
    }

    /** Until it is claimed or released, on WATCHING's thread: a grant whose block will not
     *  come (its asker ended, it was dropped or stopped, or it waited DROP_AFTER_MS) is
     *  released as it arrives, and its request, while it waits for a holder, cancelled. */
    private void watch() {
        boolean settled = false;
        try {
            settled = settle();
        } catch (Throwable e) {  // looked at again: a grant is never left behind
            LOG.warn("zklock: a grant asked ahead could not be watched", e);
        } finally {
            if (!settled) {
                watchLater();
            }
        }
    }

    /** One look: true once it is claimed, or released where it was dropped. */
    private boolean settle() {
        if (state.get() == State.ASKED
                && (!asker.isAlive() || stopped.getAsBoolean() || unclaimedTooLong())) {
            state.compareAndSet(State.ASKED, State.DROPPED);
        }
        State now = state.get();
        if (now == State.DROPPED && asked.isDone()) {
            release(arrived());
            return true;
        }
        if (now == State.DROPPED) {
            cancel();
        }
        return now == State.CLAIMED;
    }

    /** Its answer, once come; empty while on its way, or where the ask failed. */
    private Optional<Asked> arrived() {
        return asked.isDone() && !asked.isCompletedExceptionally()
            ? Optional.of(asked.join()) : Optional.empty();
    }

    private boolean unclaimedTooLong() {
        return arrived().filter(a -> System.nanoTime() - a.answered
            > TimeUnit.MILLISECONDS.toNanos(DROP_AFTER_MS)).isPresent();
    }

    /** An answer no block holds, released where it granted. */
    private void release(Optional<Asked> answered) {
        answered.filter(Asked::granted)
            .ifPresent(a -> Releases.later(client, handle, a.nodes()));
    }

    /** Its request given up where it still waits (once), on ASKING's thread: a call into
     *  the lock client never holds up the watch of other grants. */
    private void cancel() {
        if (!asked.isDone() && cancelled.compareAndSet(false, true)) {
            ASKING.execute(() -> {
                try {
                    client.cancel(handle);
                } catch (RuntimeException e) {  // it waits on: released as it arrives
                    LOG.debug("zklock: a lock request could not be cancelled", e);
                }
            });
        }
    }

    /** The answer asked ahead for {@code answer}'s locks from {@code by}, now the caller's
     *  to hold or release (waiting for it where it is on its way); empty where nothing was
     *  asked for them, or the grant was released meanwhile: the caller asks itself. A
     *  failed ask is thrown as the caller's own would be. An interruption of the wait, or
     *  its block stopped (Spark marks a query stopped before it interrupts its thread, and
     *  some of Spark's own waits swallow the interruption), cancels the request, and is
     *  thrown once it answered (a grant that came first released): the query stops without
     *  waiting for the holder. */
    Optional<Asked> claim(EngineLockClient by, JsonNode answer) {
        if (this == NONE) {
            return Optional.empty();
        }
        if (OUTSTANDING.get() == this) {
            OUTSTANDING.remove();
        }
        if (stopped.getAsBoolean()) {  // a request of its own would wait on uncancelled
            drop();
            throw EngineRefusal.<RuntimeException>sneaky(new InterruptedException(
                "zklock: the query was stopped before its batch's sink"));
        }
        if (by != client || !this.answer.equals(answer)) {
            drop();
            return Optional.empty();
        }
        if (!state.compareAndSet(State.ASKED, State.CLAIMED)) {
            return Optional.empty();
        }
        return Optional.of(answered());
    }

    /** The claimed request's answer, waited for until it comes; an interruption or a stop
     *  meanwhile cancels the request, and is thrown once it answered. */
    private Asked answered() {
        InterruptedException interruption = null;
        Asked answered;
        while (true) {
            try {
                answered = asked.get(WATCH_MS, TimeUnit.MILLISECONDS);
                break;
            } catch (TimeoutException e) {
                if (interruption == null && stopped.getAsBoolean()) {
                    interruption = new InterruptedException("zklock: the query was stopped"
                        + " while its batch waited for its locks");
                    cancel();
                }
            } catch (InterruptedException e) {
                if (interruption == null) {
                    interruption = e;
                    cancel();
                }
            } catch (ExecutionException e) {
                throw EngineRefusal.<RuntimeException>sneaky(
                    interruption != null ? interruption : e.getCause());
            }
        }
        if (interruption != null) {  // given up: a grant that came first is released
            release(Optional.of(answered));
            throw EngineRefusal.<RuntimeException>sneaky(interruption);
        }
        return answered;
    }

    /** Release the grant unless claimed (as it arrives), its request cancelled meanwhile. */
    public void drop() {
        if (this != NONE) {
            state.compareAndSet(State.ASKED, State.DROPPED);
        }
    }
}
