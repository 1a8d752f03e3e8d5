// Streaming writes into tables, refused when a streaming query starts. A query that writes for
// ever cannot hold a statement's locks, and a micro-batch's write is not a command Spark
// executes, so the engine could neither lock it nor see it. Hive has no streaming writer to
// compare with; its Streaming Ingest API takes a lock per transaction batch, which a lease
// matches here (LOCK TABLE ... FOR, around a writer that runs under it).
//
// An analyzer rule (it runs when DataStreamWriter.start() or toTable() analyses the query):
// a WriteToStream whose sink is a catalog table or files (a file sink, a V2 file table) is
// refused in one line. Other sinks run: foreachBatch's batches write through the engine like
// any statement, and console, memory, Kafka and the like write no table.
package zklock.engine;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.streaming.WriteToStream;

import zklock.EngineRefusal;

public final class StreamingWrites extends Rule<LogicalPlan> {
    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (plan instanceof WriteToStream) {
            WriteToStream write = (WriteToStream) plan;
            String sink = write.sink().getClass().getSimpleName();
            if (write.catalogTable().isDefined() || write.catalogAndIdent().isDefined()
                    || sink.contains("FileStreamSink") || sink.contains("FileTable")) {
                throw EngineRefusal.refused("zklock: refused a streaming write to "
                    + target(write, sink) + ": a query that writes for ever cannot hold a"
                    + " statement's locks; write in batches (foreachBatch is locked like any"
                    + " statement), or hold a lease on the target (LOCK TABLE ... FOR)");
            }
        }
        return plan;
    }

    /** The table or sink a streaming write names, for the message. */
    private static String target(WriteToStream write, String sink) {
        if (write.catalogTable().isDefined()) {
            return write.catalogTable().get().identifier().unquotedString();
        }
        return write.catalogAndIdent().isDefined()
            ? write.catalogAndIdent().get()._2().toString() : sink;
    }
}
