// The lock client of a Spark process that never imported zklock's Python (Spark's Thrift
// server, spark-sql, a spark-submit that never calls enforce(), Spark's own Connect server
// script): zklock's Python lock client started as a child process, `python -m
// zklock.spark.lock_process`, speaking over its stdin and stdout the same versioned JSON the
// engine sends a py4j client (EngineLockClient.java). So the lock protocol keeps one
// implementation, the Python one. HiveServer2 locks every client's statements in its own
// process; here the process asks its child.
//
// The pipe carries one JSON document per line:
//   JVM -> child: {"version": 1, "conf": {...}, "hadoop": {hive.* of Spark's Hadoop conf},
//                  "application": "...",                                     (first, once)
//                  "abandoned": [the lock nodes of the children that died before it]}
//                 {"version": 1, "id": n, "call": "acquire" | "parse", "request": {...}}
//                 {"version": 1, "id": n, "call": "release" | "cancel", "handle": "...",
//                  "failed": b}                 (a cancel is answered at once, beside waits)
//   child -> JVM: {"version": 1, "event": "ready", "pid": n,               (first, once)
//                  "profile": {ClientProfile.java's document}}
//                 {"version": 1, "id": n, "reply": {...}}                   (any order)
//                 {"version": 1, "event": "lost", "query_id": "..."}       (a set was lost)
//                 {"version": 1, "event": "waiting", "message": "zklock: ..."} (a statement
//                  waits: the line goes to this JVM's stderr, where its user looks)
//
// Lifetimes: the child lives as long as this JVM (it exits when its stdin closes, and the
// JVM's shutdown closes it). Its death is the loss of every lock it holds: the statements'
// jobs are cancelled, their commits refused (CommitFence.abandon), their release says lost,
// and the next statement starts a new child (ChildSupervisor.java), which deletes the dead
// one's lock nodes at once: nothing can use them any more, and ZooKeeper would keep them
// until the dead child's session expires, holding up every statement that needs them.
package zklock.engine;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.util.RawValue;

import org.apache.spark.SparkContext;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Setting;
import zklock.Protocol.Field;
import zklock.Protocol.Outcome;
import zklock.commit.CommitFence;

final class ChildLockClient implements EngineLockClient {
    /** child (default) starts this client where no other runs; none never does (the engine
     *  then refuses, or for reads warns, as spark.zklock.engine.reads says). */
    static final Setting SETTING = Protocol.LOCK_CLIENT;
    private static final int VERSION = Protocol.Version.ENGINE;

    private final SparkContext sc;
    private final Process process;
    private final OutputStream toChild;
    private final String command;
    private final AtomicLong ids = new AtomicLong();
    private final Map<Long, CompletableFuture<JsonNode>> pending = new ConcurrentHashMap<>();
    /** Granted and not released, by handle: what a death must cancel and fence. */
    private final Map<String, Granted> held = new ConcurrentHashMap<>();
    private final Deque<String> stderr = new ArrayDeque<>();
    private final CompletableFuture<JsonNode> ready = new CompletableFuture<>();
    private volatile String death;
    /** Whether it granted a set: a child that dies before it ever did is a failed start. */
    private volatile boolean served;
    private volatile long pid = -1;
    private volatile ClientProfile profile;
    /** The lock nodes it held when it died: deleted by the child after it. */
    private final List<String> abandoned = new CopyOnWriteArrayList<>();
    private final Thread errors = new Thread(this::readErrors, "zklock-lock-client-stderr");
    private final Thread replies = new Thread(this::readReplies, "zklock-lock-client-replies");

    /** A set the child granted: its statement's job tag and its lock nodes. */
    private static final class Granted {
        final String queryId;
        final List<String> nodes;

        Granted(String queryId, List<String> nodes) {
            this.queryId = queryId;
            this.nodes = nodes;
        }
    }

    private ChildLockClient(SparkContext sc, Process process, String command) {
        this.sc = sc;
        this.process = process;
        this.toChild = process.getOutputStream();
        this.command = command;
    }

    /** Is a child to be started where no lock client runs (the application's conf)? */
    static boolean wanted(SparkContext sc) {
        return Protocol.Choice.LOCK_CLIENT_CHILD.equals(SETTING.read(sc.getConf()));
    }

    /** Start the child for {@code sc}'s application and wait until it is ready; a refusal
     *  (EngineRefusal, one line) when it cannot start, naming why. */
    static ChildLockClient start(SparkContext sc, List<String> abandoned) {
        List<String> argv = ChildLaunch.argv(sc.getConf());
        String command = String.join(" ", argv);
        Process process;
        try {
            process = new ProcessBuilder(argv).start();
        } catch (IOException e) {
            throw EngineRefusal.refused("zklock: no lock client runs in this process and its"
                + " child could not start (" + command + ": " + e.getMessage() + "); install"
                + " zklock in the driver's Python, or set " + ChildLaunch.PYTHON.key + " to a"
                + " Python that has it");
        }
        ChildLockClient child = new ChildLockClient(sc, process, command);
        child.begin(abandoned);
        return child;
    }

    private void begin(List<String> abandonedBefore) {
        replies.setDaemon(true);
        replies.start();
        errors.setDaemon(true);
        errors.start();
        Runtime.getRuntime().addShutdownHook(new Thread(this::close, "zklock-lock-client-stop"));
        try {
            send(Documents.JSON.writeValueAsString(ChildLaunch.hello(sc, abandonedBefore)));
            // how long it may take to start (import, connect) before the statement fails
            JsonNode said = ready.get(Protocol.LOCK_CLIENT_READY_MS.number(
                sc.getConf().get(Protocol.LOCK_CLIENT_READY_MS.key, null)),
                TimeUnit.MILLISECONDS);
            pid = said.path(Field.PID).asLong(-1);
            profile = ClientProfile.read(said.path(Field.PROFILE));
        } catch (IOException | ExecutionException | TimeoutException e) {
            close();
            try {
                errors.join(5000);  // what it said before it exited, for the message
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
            }
            throw EngineRefusal.refused("zklock: no lock client runs in this process and its"
                + " child (" + command + ") did not start: " + death());
        } catch (InterruptedException e) {
            close();
            Thread.currentThread().interrupt();
            throw EngineRefusal.refused("zklock: interrupted while starting the lock client");
        }
    }

    /** Is the child still there to answer? */
    boolean alive() {
        return death == null && process.isAlive();
    }

    /** The lock nodes it held when it died (none while it lives), once its reader has
     *  seen the death (at most a few seconds after the process ended). */
    List<String> abandoned() {
        try {
            replies.join(5000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return new ArrayList<>(abandoned);
    }

    boolean served() {
        return served;
    }

    long pid() {
        return pid;
    }

    /** What it said of itself when ready (ClientProfile.java). */
    ClientProfile profile() {
        return profile;
    }

    String command() {
        return command;
    }

    @Override
    public String acquire(String request) {
        try {  // the completed statements' releases it carries (Releases.java) end their sets
            Documents.JSON.readTree(request).path(Field.RELEASES)
                .forEach(h -> held.remove(h.asText()));
        } catch (IOException e) {
            // the child refuses a request it cannot read: nothing was released
        }
        JsonNode reply = call(Protocol.Call.ACQUIRE, request, null, false);
        if (Outcome.GRANTED.equals(reply.path(Field.OUTCOME).asText())) {
            served = true;
            List<String> nodes = new ArrayList<>();
            reply.path(Field.NODES).forEach(n -> nodes.add(n.asText()));
            held.put(reply.path(Field.HANDLE).asText(),
                new Granted(reply.path(Field.QUERY_ID).asText(), nodes));
            if (death != null) {  // it died as it answered: the grant is lost already
                lose(reply.path(Field.HANDLE).asText());
            }
        }
        return reply.toString();
    }

    @Override
    public String release(String handle, boolean failed) {
        Granted set = held.remove(handle);
        if (death != null) {
            return set == null ? answer(Outcome.RELEASED, "nothing was held").toString()
                : answer(Outcome.LOST, "the lock client " + command + " died while the"
                    + " statement ran (" + death + ")").toString();
        }
        return call(Protocol.Call.RELEASE, null, handle, failed).toString();
    }

    @Override
    public String parse(String request) {
        return call(Protocol.Call.PARSE, request, null, false).toString();
    }

    @Override
    public String cancel(String handle) {
        return call(Protocol.Call.CANCEL, null, handle, false).toString();
    }

    private JsonNode call(String name, String request, String handle, boolean failed) {
        long id = ids.incrementAndGet();
        CompletableFuture<JsonNode> reply = new CompletableFuture<>();
        pending.put(id, reply);
        try {
            if (death != null) {
                return unavailable();
            }
            ObjectNode line = Documents.JSON.createObjectNode();
            line.put(Field.VERSION, VERSION).put(Field.ID, id).put(Field.CALL, name);
            if (request != null) {
                line.putRawValue(Field.REQUEST, new RawValue(request));  // JSON already
            }
            if (handle != null) {
                line.put(Field.HANDLE, handle).put(Field.FAILED, failed);
            }
            send(Documents.JSON.writeValueAsString(line));
            return reply.get();
        } catch (IOException | ExecutionException e) {
            return unavailable();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return answer(Outcome.UNAVAILABLE,
                "zklock: interrupted while waiting for the lock client");
        } finally {
            pending.remove(id);
        }
    }

    private synchronized void send(String line) throws IOException {
        toChild.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        toChild.flush();
    }

    private void readReplies() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(
                process.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                JsonNode doc = Documents.JSON.readTree(line);
                if (doc.path(Field.VERSION).asInt() != VERSION) {
                    throw new IOException("a message in format " + doc.path(Field.VERSION));
                }
                if (doc.has(Field.ID)) {
                    CompletableFuture<JsonNode> reply = pending.get(doc.path(Field.ID).asLong());
                    if (reply != null) {
                        reply.complete(doc.path(Field.REPLY));
                    }
                } else if (Protocol.Event.READY.equals(doc.path(Field.EVENT).asText())) {
                    ready.complete(doc);
                } else if (Protocol.Event.LOST.equals(doc.path(Field.EVENT).asText())) {
                    cancelJobs(doc.path(Field.QUERY_ID).asText());
                } else if (Protocol.Event.WAITING.equals(doc.path(Field.EVENT).asText())) {
                    System.err.println(doc.path(Field.MESSAGE).asText());
                }
            }
            died("its output ended" + exit());
        } catch (IOException | RuntimeException e) {
            died("its output was unreadable: " + e.getMessage());
        }
    }

    private void readErrors() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(
                process.getErrorStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                System.err.println("zklock lock client: " + line);
                synchronized (stderr) {
                    stderr.addLast(line);
                    if (stderr.size() > 20) {
                        stderr.removeFirst();
                    }
                }
            }
        } catch (IOException e) {
            // its stderr closed with it: what it said is kept
        }
    }

    /** The child is gone: every set it held is lost, every waiting call unavailable. */
    private void died(String reason) {
        death = reason;
        ready.completeExceptionally(new IOException(reason));
        for (CompletableFuture<JsonNode> reply : pending.values()) {
            reply.complete(unavailable());
        }
        for (String handle : held.keySet()) {
            lose(handle);
        }
    }

    /** The set granted under {@code handle} is lost: its commit refused, its jobs cancelled
     *  (it stays in {@link #held} for its release to report the loss). */
    private void lose(String handle) {
        Granted set = held.get(handle);
        if (set == null) {
            return;
        }
        CommitFence.abandon(set.nodes, "the lock client " + command + " died");
        abandoned.addAll(set.nodes);
        cancelJobs(set.queryId);
    }

    private void cancelJobs(String queryId) {
        try {
            LostJobs.cancel(sc, queryId);
        } catch (RuntimeException e) {
            // Spark stopped: nothing left to cancel
        }
    }

    private JsonNode unavailable() {
        return answer(Outcome.UNAVAILABLE, "zklock: the lock client " + command
            + " is gone (" + death() + "); the statement did not run");
    }

    /** Why it died (its last words on stderr, else how its output ended). */
    String death() {
        synchronized (stderr) {
            for (Iterator<String> it = stderr.descendingIterator(); it.hasNext();) {
                String line = it.next().trim();
                if (!line.isEmpty()) {
                    return line;
                }
            }
        }
        return death != null ? death : "it exited" + exit();
    }

    private String exit() {
        try {
            return process.waitFor(2, TimeUnit.SECONDS) ? " (exit " + process.exitValue() + ")"
                : "";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "";
        }
    }

    private static JsonNode answer(String outcome, String message) {
        return Documents.JSON.createObjectNode().put(Field.VERSION, VERSION)
            .put(Field.OUTCOME, outcome).put(Field.MESSAGE, message);
    }

    /** Close the child's stdin: it releases what it holds and exits. */
    void close() {
        try {
            toChild.close();
        } catch (IOException e) {
            // gone already
        }
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
