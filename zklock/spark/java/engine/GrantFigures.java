// The figures of one grant, for Spark's SQL tab (LockFigures.java) and the metrics
// (LockMetricsSource.java): how long the statement waited for its locks and over how many
// attempts (those of an earlier grant of the same statement, given back to plan again,
// included), whom it waited for, what it held in S and X, how long it held them, how long
// its end took and whether its release was sent after it returned, and whether it lost them.
package zklock.engine;

import com.fasterxml.jackson.databind.JsonNode;

import zklock.Protocol.Field;
import zklock.Protocol.Mode;

final class GrantFigures {
    private final JsonNode held;
    private long waitNanos;
    private int attempts;
    private String waitedFor = "";
    private long grantedAt;
    private long releasedAt;
    private long endNanos;
    private boolean releasedAfter;
    private volatile boolean lost;

    /** The figures of a grant of {@code held}'s locks (null: nothing held). */
    GrantFigures(JsonNode held) {
        this.held = held;
    }

    /** Asked at {@code askedAt} and granted at {@code grantedAt} (System.nanoTime), after
     *  {@code attempts} attempts, last denied by {@code waitedFor}. The wait is the
     *  request's, as the event log's grant records it: a grant asked ahead of its statement
     *  (GrantAhead) shows what its request waited for the holders, even where Spark's own
     *  work before the statement overlapped that wait. */
    void granted(long askedAt, long grantedAt, int attempts, String waitedFor) {
        this.grantedAt = grantedAt;
        waitNanos = grantedAt - askedAt;
        this.attempts = attempts;
        this.waitedFor = waitedFor;
    }

    /** Count in the wait of an earlier grant of the same statement, given back to plan
     *  again. */
    void after(GrantFigures earlier) {
        waitNanos += earlier.waitNanos;
        attempts += earlier.attempts;
        if (waitedFor.isEmpty()) {  // the wait was before the re-plan
            waitedFor = earlier.waitedFor;
        }
    }

    /** Its end begins now. */
    void releasing() {
        releasedAt = System.nanoTime();
    }

    /** Its end is done: its release sent now or, {@code after}, once it returned. */
    void ended(boolean after) {
        endNanos = System.nanoTime() - releasedAt;
        releasedAfter = after;
    }

    /** Its set was lost while held. */
    void lost() {
        lost = true;
    }

    /** How long the statement waited for its locks, in ms. */
    long waitMillis() {
        return waitNanos / 1_000_000;
    }

    /** How many attempts its lock client made for them. */
    int attempts() {
        return attempts;
    }

    /** Whom it waited for, as its last denial named them ("" when it did not wait). */
    String waitedFor() {
        return waitedFor;
    }

    /** How many objects it holds in S (a partition's parents included). */
    int sharedObjects() {
        return objectsIn(Mode.SHARED);
    }

    /** How many objects it holds in X. */
    int exclusiveObjects() {
        return objectsIn(Mode.EXCLUSIVE);
    }

    private int objectsIn(String mode) {
        int n = 0;
        if (held != null) {
            for (JsonNode target : held.path(Field.TARGETS)) {
                n += mode.equals(target.path(Field.MODE).asText()) ? 1 : 0;
            }
        }
        return n;
    }

    /** How long it held them, in ms, once released (0 before). */
    long heldMillis() {
        return releasedAt == 0 ? 0 : (releasedAt - grantedAt) / 1_000_000;
    }

    /** How long its end took on its path, in ns: its check, or its release. */
    long endNanos() {
        return endNanos;
    }

    /** Was its release sent after it returned (Releases.java)? */
    boolean releasedAfter() {
        return releasedAfter;
    }

    /** Whether its set was lost while it held it. */
    boolean wasLost() {
        return lost;
    }
}
