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
// Order: a lock client's next acquire carries the releases not yet sent, and waits for one
// being sent, so that a statement never meets its predecessor's nodes in the same client
// (ZooKeeper serves one session's requests in order: the deletes go before the creates).
// Where the client's session differs (another LockingSession, another application), a
// release lands a moment later than it did, as any holder's does.
package zklock.engine;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;

import zklock.Protocol;
import zklock.Protocol.Field;

final class Releases {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** The releases not yet sent, by lock client (a py4j proxy's equals would call Python). */
    private static final Map<EngineLockClient, List<Pending>> QUEUED = new IdentityHashMap<>();
    /** Lock clients whose releases the sender is sending now. */
    private static final Map<EngineLockClient, Boolean> SENDING = new IdentityHashMap<>();
    private static Thread sender;

    /** A release to send: the set's handle and its nodes (for a client found dead). */
    private static final class Pending {
        final String handle;
        final List<String> nodes;

        Pending(String handle, List<String> nodes) {
            this.handle = handle;
            this.nodes = nodes;
        }
    }

    private Releases() {
    }

    /** Queue the release of {@code handle}'s set, which {@code client} granted and whose
     *  statement completed with its locks held. */
    static void later(EngineLockClient client, String handle, List<String> nodes) {
        synchronized (QUEUED) {
            QUEUED.computeIfAbsent(client, c -> new ArrayList<>()).add(new Pending(handle, nodes));
            if (sender == null) {
                sender = new Thread(Releases::send, "zklock-releases");
                sender.setDaemon(true);
                sender.start();
            }
            QUEUED.notifyAll();
        }
    }

    /** The releases {@code client} has not been sent yet, taken from the queue to travel
     *  with its next acquire (lock_client.py releases them first), after any being sent to
     *  it now; an empty array for none. */
    static ArrayNode takeFor(EngineLockClient client) {
        ArrayNode out = JSON.createArrayNode();
        synchronized (QUEUED) {
            while (SENDING.containsKey(client)) {
                try {
                    QUEUED.wait();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
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
            while (SENDING.containsKey(client)) {
                try {
                    QUEUED.wait();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
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
            QUEUED.remove(dead);
        }
    }

    private static void send() {
        while (true) {
            EngineLockClient client;
            List<Pending> pending;
            synchronized (QUEUED) {
                while (QUEUED.isEmpty()) {
                    try {
                        QUEUED.wait();
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                client = QUEUED.keySet().iterator().next();
                pending = QUEUED.remove(client);
                SENDING.put(client, Boolean.TRUE);
            }
            sendAll(client, pending);
        }
    }

    /** Release each of {@code pending} through {@code client} (marked SENDING by the
     *  caller), then let the client's next acquire go. */
    private static void sendAll(EngineLockClient client, List<Pending> pending) {
        try {
            for (Pending p : pending) {
                try {
                    JsonNode answer = JSON.readTree(client.release(p.handle, false));
                    if (Protocol.OUTCOME_LOST.equals(answer.path(Field.OUTCOME).asText())) {
                        // its statement returned: its nodes were there at its end
                        System.err.println("zklock: a set lost after its statement completed"
                            + " (" + answer.path(Field.MESSAGE).asText("session lost") + ")");
                    }
                } catch (RuntimeException | java.io.IOException e) {
                    if (EngineGuard.callbackGone(e)) {
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
