// A run of a declarative pipeline (spark-pipelines run, Spark 4.1+) refreshes a materialized
// view in steps: as the run starts, Spark's DatasetManager TRUNCATEs it (and alters its schema
// through the catalog), and later the view's flow writes its new rows. Each step alone is a
// statement, or no statement at all, so a reader between them finds the view empty, in
// Spark itself too, and two runs write into each other's refresh. zklock holds the locks of
// such a TRUNCATE for the run rather than the statement: they become the session's own
// (SessionLocks, as a LOCK TABLE's), held until the pipeline's Spark Connect session ends
// with the run. The run's flows write under them; a reader waits for the run and then reads
// the new view; a second run waits at its own TRUNCATE.
//
// A streaming table's TRUNCATE (--full-refresh) stays a statement: its stream then writes
// batch by batch from the start, each batch a locked statement of its own, as every stream
// does (a reader sees it fill again, as Spark documents a full refresh). Held for the run,
// it would make two runs wait on each other: one's stream for the table the other holds,
// the other for a view the first holds.
package zklock.engine;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;

import zklock.Protocol.Field;
import zklock.commit.BatchLog;

final class PipelineRuns {
    /** The class whose code TRUNCATEs a pipeline's datasets as its run starts. */
    private static final String MATERIALIZER =
        "org.apache.spark.sql.pipelines.graph.DatasetManager$";

    private PipelineRuns() {
    }

    /** Whether this thread runs a pipeline's materialization: the statements it runs are
     *  steps of the run's refresh. Walked only for a TRUNCATE outside a locked statement. */
    static boolean materializing() {
        for (StackTraceElement frame : Thread.currentThread().getStackTrace()) {  // (Java 8)
            if (MATERIALIZER.equals(frame.getClassName())) {
                return true;
            }
        }
        return false;
    }

    /** For a TRUNCATE that {@link #materializing} runs, whose locks are {@code answer}: hold
     *  them for {@code session}'s run where it refreshes a materialized view (SessionLocks),
     *  so that the statement then runs under them; else nothing (the TRUNCATE is locked as
     *  any statement). A session with no end to hear (not Spark Connect's, as
     *  spark-pipelines' is) keeps its TRUNCATE a statement too: nothing would release it. */
    static void holdForRun(SparkSession session, JsonNode answer, String statement) {
        if (answer.path(Field.TARGETS).size() == 0 || streamed(session, answer)
                || SessionEnds.current(session) == null) {
            return;
        }
        SessionLocks.holdForRun(session, answer, statement);
    }

    /** Whether a table the TRUNCATE writes keeps a stream's batch records (BatchLog): a
     *  streaming table. One Spark cannot name is taken for a view (held for the run: more,
     *  never less). */
    private static boolean streamed(SparkSession session, JsonNode answer) {
        for (JsonNode target : answer.path(Field.TARGETS)) {
            if (!target.path(Field.TABLE).isTextual()) {
                continue;
            }
            try {
                CatalogTable table = session.sessionState().catalog().getTableMetadata(
                    new TableIdentifier(target.path(Field.TABLE).asText(),
                        scala.Option.apply(target.path(Field.DB).asText())));
                if (BatchLog.kept(new Path(table.location()),
                        session.sessionState().newHadoopConf())) {
                    return true;
                }
            } catch (Exception e) {  // Spark's checked NoSuchTableException among them
                return false;
            }
        }
        return false;
    }
}
