// Why zklock's engine extension did not run a statement, or failed it: the one exception it
// throws. It is a QueryExecutionException, which PySpark converts in both kinds of session
// (pyspark.errors.QueryExecutionException, classic and Spark Connect), and a SparkThrowable
// whose condition names the outcome, so a plain session gets a typed error it can tell apart:
//   ZKLOCK_REFUSED      zklock cannot or will not lock the statement (UnsupportedStatement)
//   ZKLOCK_LOCK_DENIED  a lock request denied after its retries (LockNotAcquired)
//   ZKLOCK_LOCK_LOST    a statement whose locks were lost (LockLost)
//   ZKLOCK_UNAVAILABLE  ZooKeeper out of reach (ZooKeeperUnavailable)
//   ZKLOCK_WRITE_FAILED a statement that wrote under its locks failed: the message names
//                       what it wrote and what became of it, the cause is Spark's error
//                       (WriteFailed)
// A LockingSession raises zklock's own exception for each (zklock/spark/errors.py). The
// conditions are not in Spark's error-class files: every SparkThrowable method that would
// look one up is answered here.
//
// QueryExecutionException is a checked exception to Java (Scala has none): throw one with
// `throw EngineRefusal.raise(refusal)`, which Java lets through any method.
package zklock;

import java.util.HashMap;
import java.util.Collections;
import java.util.Map;

import org.apache.spark.QueryContext;
import org.apache.spark.SparkThrowable;
import org.apache.spark.sql.execution.QueryExecutionException;

public class EngineRefusal extends QueryExecutionException implements SparkThrowable {
    private static final long serialVersionUID = 1L;

    public static final String REFUSED = Protocol.Condition.REFUSED;
    public static final String DENIED = Protocol.Condition.DENIED;
    public static final String LOST = Protocol.Condition.LOST;
    public static final String UNAVAILABLE = Protocol.Condition.UNAVAILABLE;
    public static final String WRITE_FAILED = Protocol.Condition.WRITE_FAILED;

    private final String condition;
    private final Map<String, String> parameters;

    EngineRefusal(String condition, String message, Throwable cause,
                  Map<String, String> parameters) {
        super(message, cause);
        this.condition = condition;
        this.parameters = Collections.unmodifiableMap(new HashMap<>(parameters));
    }

    /** A refusal: zklock cannot or will not lock the statement. Throw it with raise(). */
    public static EngineRefusal refusal(String message) {
        return new EngineRefusal(REFUSED, message, null, Collections.emptyMap());
    }

    /** Throw {@code refusal} from any method (see the header); never returns. */
    public static RuntimeException raise(EngineRefusal refusal) {
        return EngineRefusal.<RuntimeException>sneaky(refusal);
    }

    /** Throw a refusal with {@code message}; never returns. */
    public static RuntimeException refused(String message) {
        return raise(refusal(message));
    }

    /** The outcome a lock client answered with (denied, lost, unavailable, else a
     *  refusal). */
    public static EngineRefusal of(String outcome, String message, Throwable cause) {
        return of(outcome, message, cause, Collections.emptyMap());
    }

    /** ... with its parameters: "objects", the lost set's objects, one per line. */
    public static EngineRefusal of(String outcome, String message, Throwable cause,
                            Map<String, String> parameters) {
        String condition = Protocol.Outcome.DENIED.equals(outcome) ? DENIED
            : Protocol.Outcome.LOST.equals(outcome) ? LOST
            : Protocol.Outcome.UNAVAILABLE.equals(outcome) ? UNAVAILABLE : REFUSED;
        return new EngineRefusal(condition, message, cause, parameters);
    }

    /** A write that failed under its locks (ZKLOCK_WRITE_FAILED), Spark's error its cause. */
    public static EngineRefusal writeFailed(String message, Throwable cause,
                                     Map<String, String> parameters) {
        return new EngineRefusal(WRITE_FAILED, message, cause, parameters);
    }

    /** Throw {@code e}, a checked exception Spark declares (its AnalysisException), as it is
     *  from any method; never returns. */
    @SuppressWarnings("unchecked")
    public static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
        throw (E) e;
    }

    // Spark 4.0 on ask it (no @Override: Spark 3.5's interface has getErrorClass only)
    public String getCondition() {
        return condition;
    }

    // Spark 3.5's name for the condition (4.0 on derive it from getCondition)
    @Override
    public String getErrorClass() {
        return condition;
    }

    /** SQLSTATE, as a JDBC client sees it: 55P03 (lock not available, PostgreSQL's) for a
     *  denial, 40003 (statement completion unknown) for a loss, 08001 (cannot connect) for
     *  ZooKeeper out of reach, 0A000 (feature not supported) for a refusal. Spark's own code reads it (a SQL script's handlers). */
    @Override
    public String getSqlState() {
        if (WRITE_FAILED.equals(condition)) {  // the failure's own, else an I/O error's
            Throwable cause = getCause();
            String state = cause instanceof SparkThrowable
                ? ((SparkThrowable) cause).getSqlState() : null;
            return state != null ? state : "58030";
        }
        return DENIED.equals(condition) ? "55P03" : LOST.equals(condition) ? "40003"
            : UNAVAILABLE.equals(condition) ? "08001" : "0A000";
    }

    @Override
    public boolean isInternalError() {
        return false;
    }

    @Override
    public Map<String, String> getMessageParameters() {
        return parameters;
    }

    @Override
    public QueryContext[] getQueryContext() {
        return new QueryContext[0];
    }

    public String getDefaultMessageTemplate() {
        return getMessage();
    }
}
