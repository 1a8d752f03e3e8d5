// The offset logs of the streaming queries whose batches zklock locks, by their directory
// (<checkpoint>/offsets): Spark writes a batch's offsets (OffsetSeqLog) before it gets the
// batch's input, plans it and calls its sink, on the query's thread. zklock's checkpoint
// manager (adapters/LazySinkLogs.java) tells MicroBatch here that a batch is next, and the
// batch's locks are asked for then (GrantAhead). A query whose offsets go through another
// manager, or a batch Spark runs again from offsets already written (a restart), asks as its
// sink starts, through GrantAhead all the same, so that a stop cancels its wait.
package zklock.stream;

import java.lang.ref.WeakReference;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public final class OffsetLogs {
    private static final Logger LOG = LoggerFactory.getLogger(OffsetLogs.class);
    /** Spark's name for a checkpoint's offset log (StreamExecution.checkpointFile). */
    private static final String NAME = "offsets";
    /** The queries by their offset log's directory; a query's entry goes with the query
     *  (weakly held), and a restart of its checkpoint replaces it. */
    private static final Map<Path, WeakReference<MicroBatch>> QUERIES =
        new ConcurrentHashMap<>();

    private OffsetLogs() {
    }

    /** {@code batches} writes its offsets under {@code checkpoint} (the query's resolved
     *  checkpoint location): as its query starts, and again as each batch runs (a start on
     *  the checkpoint of a running query, refused by Spark after its analysis registered
     *  it, is replaced by the running one at its next batch). */
    static void register(String checkpoint, MicroBatch batches) {
        Path dir = new Path(new Path(checkpoint), NAME);
        WeakReference<MicroBatch> known = QUERIES.get(dir);
        if (known != null && known.get() == batches) {
            return;
        }
        QUERIES.values().removeIf(query -> query.get() == null);
        QUERIES.put(dir, new WeakReference<>(batches));
    }

    /** Spark is about to write {@code file}, through zklock's checkpoint manager: where it is
     *  a registered query's offsets for a batch, that batch is next. */
    public static void writing(Path file) {
        Path dir = file.getParent();
        if (dir == null || !NAME.equals(dir.getName())) {
            return;
        }
        WeakReference<MicroBatch> query = QUERIES.get(dir);
        MicroBatch batches = query == null ? null : query.get();
        if (batches == null) {
            return;
        }
        long batch;
        try {
            batch = Long.parseLong(file.getName());
        } catch (NumberFormatException e) {  // not a batch's offsets
            return;
        }
        try {
            batches.next(batch);
        } catch (Exception e) {  // (EngineRefusal: checked to Java) its sink asks, as without
            LOG.debug("zklock: the locks of batch {} not asked ahead", batch, e);
        }
    }
}
