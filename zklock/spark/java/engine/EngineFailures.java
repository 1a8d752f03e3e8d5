// What a statement's caller is told when something failed around its locks, in one place:
// py4j's failure to reach a Python lock client (not an error the client raised), the refusal
// of zklock's committers behind Spark's error (the fence), a write that failed under its
// locks (ZKLOCK_WRITE_FAILED, naming what became of it), and a set lost while the statement
// ran (ZKLOCK_LOCK_LOST: completed, cancelled, or its commit refused).
package zklock.engine;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Field;
import zklock.Protocol.Message;
import zklock.Protocol.Outcome;
import zklock.commit.CommitFence;
import zklock.commit.WriteOutcome;

final class EngineFailures {
    private EngineFailures() {
    }

    /** Is {@code e} py4j's failure to reach a Python lock client (its callback server gone:
     *  no channel to it, or the connection broken), not an error the client raised? py4j
     *  says so with its network exception, an I/O cause, or, where Python's end of a pinned
     *  thread's connection closed (ClientServerConnection), "Received empty command". */
    static boolean callbackGone(Throwable e) {
        boolean py4j = false;
        boolean io = false;
        for (Throwable t = e; t != null; t = t.getCause()) {
            String name = t.getClass().getName();
            String message = String.valueOf(t.getMessage());
            py4j |= name.startsWith("py4j.");
            io |= t instanceof IOException || name.equals("py4j.Py4JNetworkException")
                || message.contains("communication channel")
                || message.contains("Received empty command");
        }
        return py4j && io;
    }

    /** The refusal of zklock's committers behind {@code failure} (CommitFence.REFUSED, as its
     *  message begins), or null. */
    static String fenceRefusal(Throwable failure) {
        for (Throwable t = failure; t != null; t = t.getCause()) {
            String message = t.getMessage();
            int at = message == null ? -1 : message.indexOf(CommitFence.REFUSED);
            if (at >= 0) {
                return message.substring(at).split("\n", 2)[0].trim();
            }
        }
        return null;
    }

    /** What a statement that held its own set (writing {@code writes}, null for none) tells
     *  its caller at its end, from its release's answer {@code released}: null when it
     *  returns; the refusal naming a commit the fence refused ({@code refused}), a loss, or a
     *  write that failed under its locks, caused by {@code failure} (null: it completed). */
    static EngineRefusal atEnd(String command, String writes, Throwable failure,
                               String refused, JsonNode released,
                               WriteOutcome.Summary written) {
        Map<String, String> parameters = Collections.singletonMap(Field.OBJECTS,
            String.join("\n", objects(released)));
        if (refused != null) {  // the loss may be known to ZooKeeper only, not to the client
            return EngineRefusal.of(Outcome.LOST, Protocol.message(Message.COMMIT_REFUSED,
                "refused", refused, "command", command), failure, parameters);
        }
        if (!Outcome.LOST.equals(released.path(Field.OUTCOME).asText())) {
            return failure == null ? null : writeFailed(command, writes, failure, written);
        }
        String reason = released.path(Field.MESSAGE).asText(Message.UNKNOWN_LOSS);
        if (failure == null && writes != null && written.committedThroughFence()) {
            // Every job committed after the fence found its locks in ZooKeeper: the write was
            // made under them, and its rows are in the table. Raising now would tell the
            // caller it failed (a retry would duplicate it), so it returns, and the loss,
            // which came after, is logged. A query's loss is raised: its rows may mix states.
            System.err.println("zklock: locks lost after " + command + " writing " + writes
                + " committed through the fence (" + reason + "); the statement returns: its"
                + " write is complete");
            return null;
        }
        return lost(command, reason, failure, parameters);
    }

    /** The refusal naming a set lost while {@code command} ran: it completed, or its jobs
     *  were cancelled ({@code failure}). */
    static EngineRefusal lost(String command, String reason, Throwable failure,
                              Map<String, String> parameters) {
        String why = Protocol.message(failure != null ? Message.LOST_CANCELLED
            : Message.LOST_COMPLETED, "command", command, "reason", reason);
        return EngineRefusal.of(Outcome.LOST, why, failure, parameters);
    }

    private static List<String> objects(JsonNode released) {
        List<String> objects = new ArrayList<>();
        released.path(Field.OBJECTS).forEach(o -> objects.add(o.asText()));
        return objects;
    }

    /** A write that failed under its locks, typed (ZKLOCK_WRITE_FAILED), naming what it
     *  wrote and what became of it (WriteOutcome), with Spark's error as its cause; null
     *  for a statement that wrote nothing or failed with zklock's own refusal. */
    private static EngineRefusal writeFailed(String command, String writes, Throwable failure,
                                             WriteOutcome.Summary written) {
        String outcome = written.describe();
        if (writes == null || failure instanceof EngineRefusal) {
            return null;
        }
        Throwable root = failure;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        String cause = firstLine(failure);
        if (root != failure && !cause.contains(firstLine(root))) {  // the task's own error
            cause += " (caused by: " + firstLine(root) + ")";
        }
        return EngineRefusal.writeFailed("zklock: " + command + " writing " + writes
            + " failed; " + outcome + ". Spark's error: " + cause, failure,
            Collections.singletonMap(Field.TABLE, writes));
    }

    private static String firstLine(Throwable e) {
        return e.getMessage() == null || e.getMessage().trim().isEmpty()
            ? e.getClass().getName() : e.getMessage().trim().split("\n", 2)[0];
    }
}
