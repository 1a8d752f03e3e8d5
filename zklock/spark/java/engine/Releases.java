// A completed statement's release, off the statement's path: queued here and sent to its lock
// client by a thread of its own, or carried by that client's next acquire, whichever comes
// first. So a statement returns after one crossing to its lock client (the grant), not two.
//
// Hive's Driver releases a query's locks before it returns (releaseLocksAndCommitOrRollback),
// on the query's thread; zklock's engine knows when a statement returned that its locks held
// throughout without asking the lock client: its lock nodes still exist at the end
// (EngineGuard.exit checks them, or the fence did at the job commit), and a lock node, once
// gone, never comes back. What the release still does (delete the nodes, record the event)
// then happens after the statement's return, a moment later.
//
// The statement's thread only appends to a lock-free queue: it never waits for the sender,
// nor wakes it while the sender is busy (the sender looks every POLL_MS while statements
// keep ending, and sleeps once idle).
//
// Order: a lock client's next acquire carries the releases not yet sent, and waits for one
// being sent, so that a statement never meets its predecessor's nodes in the same client
// (ZooKeeper serves one session's requests in order: the deletes go before the creates).
// Where the client's session differs (another LockingSession, another application), a
// release lands a moment later than it did, as any holder's does.
package zklock.engine;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;

import zklock.Protocol;
import zklock.Protocol.Field;

final class Releases {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Where completed statements leave their releases (no lock taken). */
    private static final ConcurrentLinkedQueue<Pending> INBOX = new ConcurrentLinkedQueue<>();
    /** The releases not yet sent, by lock client (a py4j proxy's equals would call Python);
     *  guarded, with SENDING, by QUEUED's monitor, which no statement's end takes. */
    private static final Map<EngineLockClient, List<Pending>> QUEUED = new IdentityHashMap<>();
    /** Lock clients whose releases the sender is sending now. */
    private static final Map<EngineLockClient, Boolean> SENDING = new IdentityHashMap<>();
    private static volatile Thread sender;
    /** Whether the sender sleeps until unparked (idle), rather than looking every POLL_MS. */
    private static volatile boolean asleep;
    /** While statements keep ending, the sender looks for releases this often rather than
     *  being woken by each (a wake-up may hand it the core of the statement's thread). */
    private static final long POLL_MS = 2;
    /** How long the sender keeps looking after its last release before it sleeps. */
    private static final long IDLE_MS = 200;

    /** A release to send: its lock client, the set's handle and its nodes (for a client
     *  found dead). */
    private static final class Pending {
        final EngineLockClient client;
        final String handle;
        final List<String> nodes;

        Pending(EngineLockClient client, String handle, List<String> nodes) {
            this.client = client;
            this.handle = handle;
            this.nodes = nodes;
        }
    }

    private Releases() {
    }

    /** Queue the release of {@code handle}'s set, which {@code client} granted: its
     *  statement completed with its locks held, or a read's detached rows were all taken
     *  (EngineGuard.releaseDetached: a loss while they were read cancelled its jobs). */
    static void later(EngineLockClient client, String handle, List<String> nodes) {
        INBOX.add(new Pending(client, handle, nodes));
        Thread running = sender;
        if (running == null) {
            synchronized (Releases.class) {
                if (sender == null) {
                    sender = new Thread(Releases::send, "zklock-releases");
                    sender.setDaemon(true);
                    sender.start();
                }
            }
        } else if (asleep) {  // else it looks within POLL_MS
            LockSupport.unpark(running);
        }
    }

    /** Move what the inbox holds to QUEUED (under its monitor). */
    private static void sort() {
        for (Pending p = INBOX.poll(); p != null; p = INBOX.poll()) {
            QUEUED.computeIfAbsent(p.client, c -> new ArrayList<>()).add(p);
        }
    }

    /** Wait (under QUEUED's monitor) until nothing is being sent to {@code client}. */
    private static boolean idle(EngineLockClient client) {
        while (SENDING.containsKey(client)) {
            try {
                QUEUED.wait();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return true;
    }

    /** The releases {@code client} has not been sent yet, taken from the queue to travel
     *  with its next acquire (lock_client.py releases them first), after any being sent to
     *  it now; an empty array for none. */
    static ArrayNode takeFor(EngineLockClient client) {
        ArrayNode out = JSON.createArrayNode();
        synchronized (QUEUED) {
            idle(client);
            sort();
            List<Pending> pending = QUEUED.remove(client);
            for (Pending p : pending == null ? Collections.<Pending>emptyList() : pending) {
                out.add(p.handle);
            }
        }
        return out;
    }

    /** Send what is queued for {@code client} now and wait for it: before the client stops
     *  being asked (a LockingSession closed, another installed), while its Python is there. */
    static void flush(EngineLockClient client) {
        List<Pending> pending;
        synchronized (QUEUED) {
            if (!idle(client)) {
                return;
            }
            sort();
            pending = QUEUED.remove(client);
            if (pending == null) {
                return;
            }
            SENDING.put(client, Boolean.TRUE);
        }
        sendAll(client, pending);
    }

    /** {@link #flush} every lock client that is owed a release, or being sent one. */
    static void flushAll() {
        List<EngineLockClient> clients;
        synchronized (QUEUED) {
            sort();
            clients = new ArrayList<>(QUEUED.keySet());
            clients.addAll(SENDING.keySet());
        }
        for (EngineLockClient client : clients) {
            flush(client);
        }
    }

    /** Drop what {@code dead}, a lock client that stopped answering, was owed: its session
     *  ends with it, and its nodes are counted lost (LockClients.gone). */
    static void forget(EngineLockClient dead) {
        synchronized (QUEUED) {
            sort();
            QUEUED.remove(dead);
        }
    }

    private static void send() {
        long lastSent = System.nanoTime();
        while (true) {
            EngineLockClient client = null;
            List<Pending> pending = null;
            synchronized (QUEUED) {
                sort();
                if (!QUEUED.isEmpty()) {
                    client = QUEUED.keySet().iterator().next();
                    pending = QUEUED.remove(client);
                    SENDING.put(client, Boolean.TRUE);
                }
            }
            if (client != null) {
                sendAll(client, pending);
                lastSent = System.nanoTime();
                continue;
            }
            if (System.nanoTime() - lastSent > TimeUnit.MILLISECONDS.toNanos(IDLE_MS)) {
                asleep = true;
                if (INBOX.isEmpty()) {  // (a release queued after the flag is seen unparks)
                    LockSupport.park();
                }
                asleep = false;
            } else {
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(POLL_MS));
            }
            if (Thread.interrupted()) {
                return;
            }
        }
    }

    /** Release each of {@code pending} through {@code client} (marked SENDING by the
     *  caller), then let the client's next acquire go. */
    private static void sendAll(EngineLockClient client, List<Pending> pending) {
        try {
            for (Pending p : pending) {
                try {
                    JsonNode answer = JSON.readTree(client.release(p.handle, false));
                    if (Protocol.Outcome.LOST.equals(answer.path(Field.OUTCOME).asText())) {
                        // its statement returned: its nodes were there at its end (a
                        // detached read's loss, if any, cancelled its jobs as it came)
                        System.err.println("zklock: a set lost before its release ("
                            + answer.path(Field.MESSAGE).asText(Protocol.Message.UNKNOWN_LOSS)
                            + ")");
                    }
                } catch (RuntimeException | IOException e) {
                    if (EngineFailures.callbackGone(e)) {
                        LockClients.gone(client, p.nodes);
                        return;
                    }
                    System.err.println("zklock: releasing a completed statement's locks failed"
                        + " (" + e + "); its lock client's session ends them");
                }
            }
        } finally {
            synchronized (QUEUED) {
                SENDING.remove(client);
                QUEUED.notifyAll();
            }
        }
    }
}
