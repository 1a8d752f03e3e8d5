// A block of statements the JVM holds under one lock set: a streaming query's micro-batch,
// which runs its write (an insert, or Spark's file sink) as statements of its own, all under
// the batch's locks. The same entry as a block zklock's Python holds (EngineEntry.enterBlock):
// a statement run inside is covered only where the block's locks cover it.
package zklock.engine;

import java.util.List;
import java.util.function.BooleanSupplier;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.SparkSession;

import zklock.EngineRefusal;
import zklock.planner.LockAnswer;

public final class Block {
    private final EngineGuard guard;
    private final String statement;

    private Block(EngineGuard guard, String statement) {
        this.guard = guard;
        this.statement = statement;
    }

    /** The union of the planner's {@code answers} (JSON), taken by {@code session}'s lock
     *  client as a statement's locks are (waiting, denied, refused as a statement is:
     *  EngineRefusal) under the name {@code statement}, and held on this thread until
     *  {@link #close} or {@link #failed}. Its write runs next on this thread and commits
     *  through zklock's fence (a table's job commit, a file sink's log entry), which checks
     *  the nodes again before anything is visible: its first statement relies on the
     *  grant's read and reads the nodes no sooner (EnclosingLocks.runsNext). */
    public static Block hold(SparkSession session, List<String> answers, String statement,
                             GrantAhead ahead) {
        EngineGuard guard = EngineEntry.enterBlock(session, union(answers), NAME, statement,
            ahead);
        if (guard.readJustNow()) {  // the grant's read is its first check
            EnclosingLocks.runsNext(guard);
        }
        return new Block(guard, statement);
    }

    /** The grant {@link #hold} will take for the same {@code answers} and {@code statement},
     *  asked for now, ahead of the block that this thread runs next (GrantAhead): its
     *  round trips overlap what the thread does until then; its wait ends, cancelled, once
     *  {@code stopped} says the block will not come. NONE where the block would not ask for
     *  it as it is; never a refusal (the block meets its own). */
    public static GrantAhead ahead(SparkSession session, List<String> answers,
                                   String statement, BooleanSupplier stopped) {
        JsonNode answer = union(answers);
        return GrantAhead.ask(session, answer, NAME,
            StatementPlans.describe(answer.path(zklock.Protocol.Field.TARGETS)), statement,
            stopped);
    }

    /** What a block is called in its refusals. */
    private static final String NAME = "the block";

    private static JsonNode union(List<String> answers) {
        JsonNode answer = null;
        for (String text : answers) {
            JsonNode next = StatementPlans.answer(text);
            answer = answer == null ? next : LockAnswer.union(answer, next);
        }
        return answer;
    }

    /** Refuse (EngineRefusal) where the planner refused any of {@code answers}: what a
     *  streaming query's batches would lock is known, and refused, when it starts. */
    public static void check(List<String> answers) {
        for (String text : answers) {
            StatementPlans.answer(text);
        }
    }

    /** {@code setting}'s value for {@code session}'s statements, by the one precedence
     *  (LockClients.setting). */
    public static String setting(SparkSession session, zklock.Setting setting) {
        return LockClients.setting(session, setting);
    }

    /** The objects {@code answer} locks, as a person names them ("" for none). */
    public static String objects(String answer) {
        JsonNode targets = StatementPlans.answer(answer).path(zklock.Protocol.Field.TARGETS);
        return targets.size() == 0 ? "" : StatementPlans.describe(targets);
    }

    /** Release the locks of a block whose statements all completed; EngineRefusal
     *  (ZKLOCK_LOCK_LOST) when they were lost while it ran. */
    public void close() {
        EngineRefusal lost = guard.exit(statement, null);
        if (lost != null) {
            throw EngineRefusal.raise(lost);
        }
    }

    /** Release the locks of a block that failed with {@code failure}; what to throw for it
     *  (throw it with {@code EngineRefusal.sneaky}): the loss of its locks, or its failed
     *  write (ZKLOCK_WRITE_FAILED, naming what became of it), else {@code failure} itself
     *  (Spark's checked SparkException included). */
    public Throwable failed(Throwable failure) {
        EngineRefusal refusal = guard.exit(statement, failure);
        return refusal != null ? refusal : failure;
    }
}
