// Spark's checkpoint file manager (spark.sql.streaming.checkpointFileManagerClass, which the
// plugin makes the application's default: StagedCommitProtocol.becomeDefault), except for a
// file sink's log directory (_spark_metadata): Spark's sink makes it empty when the sink is
// made, as a stream starts, before zklock's rule replaces the sink of a stream into a table
// (StreamingWrites.java). A reader that resolved the table in that moment read it through
// the empty log (no rows, no partition columns) and kept that relation in its session's
// cache. Here the directory is made with its first entry: a table's replaced sink never
// makes one, a refused start leaves none, and a file sink at a path gets its log as Spark's
// own does, at its first batch, each entry in place only while the batch's locks hold (the
// sink's commit, fenced as zklock's committers are). Everything else is the default manager's.
// Spark 4.1 and newer: the interface in streaming.checkpointing (an adapter, jvm.py).
package zklock.adapters;

import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;

import zklock.commit.CommitFence;
import zklock.stream.OffsetLogs;
import zklock.stream.SinkLogDir;

public final class LazySinkLogs implements CheckpointFileManager {
    private final CheckpointFileManager spark;
    private final SinkLogDir log;
    private final SinkLogDir.ServedDir served;

    public LazySinkLogs(Path path, Configuration conf) {
        this.spark = CheckpointFileManager.create(path, SinkLogDir.withoutLazyLogs(conf));
        this.log = SinkLogDir.of(path);
        this.served = new SinkLogDir.ServedDir(path, conf);
    }

    @Override
    public CheckpointFileManager.CancellableFSDataOutputStream createAtomic(
            Path path, boolean overwriteIfPossible) {
        OffsetLogs.writing(path);  // a batch's offsets: its locks asked for now
        served.makeFor(path);
        if (!log.holds(path)) {
            return spark.createAtomic(path, overwriteIfPossible);
        }
        return new FencedEntry(spark.createAtomic(path, overwriteIfPossible));
    }

    /** A log entry, put in place as it closes only where the batch's locks still hold
     *  (CommitFence): a file sink's batch is visible once its entry is. */
    private static final class FencedEntry
            extends CheckpointFileManager.CancellableFSDataOutputStream {
        private final CheckpointFileManager.CancellableFSDataOutputStream entry;

        FencedEntry(CheckpointFileManager.CancellableFSDataOutputStream entry) {
            super(entry);
            this.entry = entry;
        }

        @Override
        public void cancel() {
            entry.cancel();
        }

        @Override
        public void close() throws IOException {
            try {
                CommitFence.check();  // the batch's locks, as a job commit's
            } catch (IOException e) {
                entry.cancel();
                throw e;
            }
            entry.close();
        }
    }

    @Override
    public FSDataInputStream open(Path path) {
        return spark.open(path);
    }

    @Override
    public FileStatus[] list(Path path, PathFilter filter) {
        return log.is(path) && !spark.exists(path) ? new FileStatus[0] : spark.list(path, filter);
    }

    @Override
    public void mkdirs(Path path) {
        if (!log.is(path)) {
            spark.mkdirs(path);
        }
    }

    @Override
    public boolean exists(Path path) {
        return spark.exists(path);
    }

    @Override
    public void delete(Path path) {
        spark.delete(path);
    }

    @Override
    public boolean isLocal() {
        return spark.isLocal();
    }

    /** A stream's checkpoint directory, named and not made: Spark makes it as it resolves a
     *  stream's checkpoint, before zklock's rule may refuse the stream, and here it is made
     *  with the first of its files (the query's metadata, its logs), as the query is made:
     *  a refused start leaves no checkpoint. */
    @Override
    public Path createCheckpointDirectory() {
        return served.qualified();
    }

    @Override
    public void close() {
        spark.close();
    }
}
