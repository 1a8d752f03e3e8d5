// The child lock client of this JVM over its life (ChildLockClient.java): started when a
// statement first needs it, started anew by the next statement after it dies, and backed
// off when it keeps dying. HDFS's NameNode and Hive's lock manager have no such child; the
// nearest is YARN's restart of a failed ApplicationMaster, which also counts failures and
// stops retrying in a tight loop.
//
// A child that served a statement and then died (killed, out of memory) is replaced at once
// by the next statement: one crash must not refuse every later statement of a Thrift server.
// A child that fails to start, or dies before it granted anything, is a strike: the next
// start waits 2 s, then 4, 8, 16 ... up to 60 s, and statements meanwhile are refused in
// one line naming the last error. Each death and each refusal to restart is logged in one
// line on the JVM's stderr, and, when spark.zklock.lockClient.statusFile names a file, the
// child's state is written there as JSON for `zklock spark thrift-server status`.
package zklock.engine;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.SparkContext;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Field;
import zklock.Setting;

final class ChildSupervisor {
    /** Where to keep the child's state as JSON (unset: nowhere). */
    static final Setting STATUS_FILE = Protocol.LOCK_CLIENT_STATUS_FILE;
    private static final long FIRST_BACKOFF_MS = 2_000L;
    private static final long MAX_BACKOFF_MS = 60_000L;
    private static final ObjectMapper JSON = new ObjectMapper();

    private ChildLockClient child;
    private int started;
    private int strikes;
    private long nextStartMs;
    private String lastError;
    /** Where a py4j lock client that died locked: the child that stands in for it must
     *  lock there too, else its statements are refused (null: anywhere). */
    private String space;
    /** The profile of the last child that started (ClientProfile.java). */
    private ClientProfile lastProfile;
    /** The lock nodes of children that died, for the next one to delete. */
    private final List<String> abandoned = new ArrayList<>();

    /** The live child, starting one when there is none; EngineRefusal when it cannot start
     *  now (its own error, or the back-off after repeated failures). */
    synchronized ChildLockClient current(SparkContext sc) {
        if (child != null && child.alive()) {
            return inPlace(child);
        }
        long now = System.currentTimeMillis();
        if (child != null) {
            died(sc, now);
        }
        if (strikes > 0 && now < nextStartMs) {
            throw EngineRefusal.raise(EngineRefusal.of(Protocol.Outcome.UNAVAILABLE,
                "zklock: the lock client"
                + " failed " + strikes + " time(s) in a row (last: " + lastError + "); the next"
                + " start is in " + (nextStartMs - now) + " ms; the statement did not run",
                null));
        }
        try {
            child = ChildLockClient.start(sc, new ArrayList<>(abandoned));
            abandoned.clear();
        } catch (Exception e) {  // its refusal (EngineRefusal is a checked exception to Java)
            lastError = e.getMessage();
            strike(now);
            System.err.println("zklock: " + lastError + " (failure " + strikes + " in a row;"
                + " the next start waits " + (nextStartMs - now) + " ms)");
            writeStatus(sc);
            throw EngineRefusal.<RuntimeException>sneaky(e);
        }
        started++;
        lastProfile = child.profile();
        writeStatus(sc);
        return inPlace(child);
    }

    /** The child died: its lock nodes kept for the next to delete, a strike counted where
     *  it never served, and its death said on stderr and in the status file. */
    private void died(SparkContext sc, long now) {
        lastError = child.death();
        abandoned.addAll(child.abandoned());
        if (child.served()) {
            strikes = 0;
        } else {
            strike(now);
        }
        System.err.println("zklock: the lock client " + child.command() + " (pid "
            + child.pid() + ") died: " + lastError + "; the statements it held failed,"
            + (strikes == 0 ? " and the next statement starts a new one"
                : " and the next start waits " + (nextStartMs - now) + " ms"));
        child = null;
        writeStatus(sc);
    }

    /** {@code live}, when it locks where the py4j lock client it stands in for locked (any
     *  child, when none died); else the statement is refused: with the Spark conf's settings
     *  where enforce() was given others, it would lock where the application's other
     *  clients do not look. */
    private ChildLockClient inPlace(ChildLockClient live) {
        if (space != null && !space.equals(live.profile().space)) {
            throw EngineRefusal.refused("zklock: this application's"
                + " Python lock client, now gone, locked in " + space + "; its lock client "
                + live.command() + " locks in " + live.profile().space + " (the Spark conf's"
                + " settings): call enforce() again, or make spark.zklock.zookeeper.quorum and"
                + " spark.zklock.root match; the statement did not run");
        }
        return live;
    }

    /** The profile of the live child, or of the last one; null before the first start. */
    synchronized ClientProfile profile() {
        return child == null ? lastProfile : child.profile();
    }

    /** A py4j lock client that locked in {@code where} (null: not known) died holding
     *  {@code nodes}: the child must lock there too, and the next one started deletes the
     *  nodes (LockClients.gone). */
    synchronized void inherit(String where, List<String> nodes) {
        if (where != null) {
            space = where;
        }
        abandoned.addAll(nodes);
    }

    private void strike(long now) {
        strikes++;
        long backoff = FIRST_BACKOFF_MS << Math.min(strikes - 1, 20);
        nextStartMs = now + Math.min(backoff, MAX_BACKOFF_MS);
    }

    /** The child's state, for operators: up, pid, starts after the first (restarts), the
     *  failures in a row and the last error. */
    synchronized Map<String, Object> status() {
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put(Field.VERSION, Protocol.Version.ENGINE);
        boolean up = child != null && child.alive();
        doc.put(Field.UP, up);
        doc.put(Field.PID, up ? child.pid() : null);
        doc.put(Field.RESTARTS, Math.max(0, started - 1));
        doc.put(Field.FAILURES_IN_A_ROW, strikes);
        doc.put(Field.LAST_ERROR, lastError);
        doc.put(Field.UPDATED_MS, System.currentTimeMillis());
        return doc;
    }

    private void writeStatus(SparkContext sc) {
        String file = STATUS_FILE.read(sc.getConf());
        if (file == null) {
            return;
        }
        try {
            Path target = Paths.get(file);
            Path tmp = target.resolveSibling(target.getFileName() + ".tmp");
            Files.write(tmp, JSON.writeValueAsString(status()).getBytes(StandardCharsets.UTF_8));
            Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING,
                StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException | RuntimeException e) {
            System.err.println("zklock: could not write the lock client's status to " + file
                + ": " + e.getMessage());
        }
    }
}
