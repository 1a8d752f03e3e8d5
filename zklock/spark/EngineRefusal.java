// Why zklock's engine extension did not run a command, or failed it: the one exception it
// throws. Its class says the outcome, so that Python sees it in both kinds of session:
// a classic session's py4j error names the class, and a Spark Connect client's error carries
// it as its reason. EngineRefusal itself is a refusal (zklock cannot or will not lock the
// command: Python's UnsupportedStatement); Denied is a lock request denied after its retries
// (LockNotAcquired); Lost is a command whose locks were lost (LockLost). error() names the
// Python exception the lock client kept for it, when the client was in this process
// (zklock/spark/engine.py raises that very exception).
package zklock;

public class EngineRefusal extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String error;

    public EngineRefusal(String message) {
        this(message, "", null);
    }

    public EngineRefusal(String message, String error, Throwable cause) {
        super(message, cause, false, false);
        this.error = error == null ? "" : error;
    }

    /** The lock client's id of the Python exception behind this one; "" without one. */
    public String error() {
        return error;
    }

    /** The outcome a lock client answered with: the right subclass for it. */
    static EngineRefusal of(String outcome, String message, String error, Throwable cause) {
        if ("denied".equals(outcome)) {
            return new Denied(message, error, cause);
        }
        if ("lost".equals(outcome)) {
            return new Lost(message, error, cause);
        }
        return new EngineRefusal(message, error, cause);
    }

    /** The command's locks were denied on every attempt. */
    public static final class Denied extends EngineRefusal {
        private static final long serialVersionUID = 1L;

        Denied(String message, String error, Throwable cause) {
            super(message, error, cause);
        }
    }

    /** The command's locks were lost before or while it ran. */
    public static final class Lost extends EngineRefusal {
        private static final long serialVersionUID = 1L;

        Lost(String message, String error, Throwable cause) {
            super(message, error, cause);
        }
    }
}
