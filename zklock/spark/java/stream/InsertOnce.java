package zklock.stream;

import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;

import zklock.EngineRefusal;
import zklock.commit.BatchLog;
import zklock.engine.Block;
import zklock.engine.GrantAhead;
import zklock.planner.LockPlanner;

/**
 * Exactly once for foreachBatch: a batch function that names its writer and batch appends
 * its rows to a catalog table of files once, however often Spark replays the batch after a
 * crash (zklock/spark/batches.py's insert_once calls it). Delta's
 * {@code txnAppId}/{@code txnVersion} for plain tables: one locked statement (X on the table,
 * S on what the rows read) that reads the writer's record, appends and records, as a
 * streaming query's batches do (TableBatches).
 */
public final class InsertOnce {
    private InsertOnce() {
    }

    /** Batch {@code batch} of {@code writer}'s {@code rows} into {@code table}, once; what
     *  became of it (TableBatches.Outcome), by name. */
    public static String insert(SparkSession session, Dataset<Row> rows, String table,
                                String writer, long batch) {
        BatchLog.checked(writer);
        CatalogTable meta = catalogTable(session, table);
        TableBatches.check(session, meta);
        LockPlanner planner = new LockPlanner(session, null);
        List<String> answers = Arrays.asList(
            planner.planWrite(meta.identifier().quotedString(), null),
            planner.planDataFrame(rows));
        Block block = Block.hold(session, answers, "batch " + batch + " of writer " + writer
            + " into " + meta.identifier().database().get() + "." + meta.identifier().table(),
            GrantAhead.NONE);
        TableBatches.Outcome outcome;
        try {
            outcome = new TableBatches(meta).write(writer, batch, rows);
        } catch (Throwable e) {  // Spark's SparkException is a checked exception to Java
            throw EngineRefusal.sneaky(block.failed(e));
        }
        block.close();
        return outcome.name();
    }

    /** The session catalog's table {@code table}; Spark's error (a name that does not parse,
     *  a table that does not exist) as it is. */
    private static CatalogTable catalogTable(SparkSession session, String table) {
        try {
            TableIdentifier name = session.sessionState().sqlParser().parseTableIdentifier(table);
            return session.sessionState().catalog().getTableMetadata(name);
        } catch (Exception e) {  // Spark 4.x declares its ParseException, a checked exception
            throw EngineRefusal.sneaky(e);
        }
    }
}
