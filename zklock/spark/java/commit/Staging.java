package zklock.commit;

import java.io.IOException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter;
import org.apache.hadoop.util.ShutdownHookManager;

/**
 * A write job's staging directory, {@code _temporary/<its attempt id>} (StagedCommitProtocol),
 * and its removal: what zklock's committers do instead of Hadoop's removal of the whole
 * {@code _temporary}, which holds the staging of every other job writing the table.
 */
public final class Staging {
    /** When, after a failed job, its directory is removed again: Spark reports a job failed
     *  while its other tasks are still being cancelled, and such a task (in an executor JVM
     *  that may be slow to stop it) may create its directories after the first removal. No
     *  other job ever reads them; these removals leave nothing behind. */
    static final long[] SETTLE_MS = {2_000L, 10_000L, 60_000L};
    private static final ScheduledExecutorService LATER =
        Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "zklock-staging-removal");
            t.setDaemon(true);
            return t;
        });

    /** The failed jobs' directories whose later removals are still to come, with the
     *  configuration that reaches their file system. */
    private static final Map<Path, Configuration> SETTLING =
        new ConcurrentHashMap<>();

    static {
        // Removals still to come when the JVM stops run then: its tasks are gone by then.
        // Hadoop's hook manager, before it closes the file systems (a higher priority runs
        // first), after Spark's stop (higher still). Run from SETTLING, not from the
        // executor's queue: a delayed task that shutdownNow() hands back cancels itself
        // when run (ScheduledThreadPoolExecutor), which left failed jobs' directories behind.
        ShutdownHookManager.get().addShutdownHook(() -> {
            LATER.shutdown();  // (not shutdownNow: it would interrupt a removal under way)
            SETTLING.forEach((mine, conf) -> quietlyRemove(mine, conf));
        }, FileSystem.SHUTDOWN_HOOK_PRIORITY + 1);
    }

    private Staging() {
    }

    /** What an isolated committer's job commit does around Hadoop's ({@code commit}): the
     *  fence last before the job's files become visible (CommitFence), the write's outcome
     *  marked on both sides of it (WriteOutcome), then only the job's own staging removed. */
    public static void commitJob(FileOutputCommitter committer, JobContext context,
                                 HadoopCommit commit) throws IOException {
        CommitFence.check();
        if (BatchLog.pending(committer, context)) {
            // a recorded batch's commit leaves no _SUCCESS marker, as Spark's file sink
            // leaves none: its records say what the table holds whole
            context.getConfiguration().setBoolean(
                FileOutputCommitter.SUCCESSFUL_JOB_OUTPUT_DIR_MARKER, false);
        }
        WriteOutcome.commitBegun();
        commit.run();
        WriteOutcome.commitDone();
        remove(committer.getJobAttemptPath(context), context.getConfiguration());
    }

    /** Hadoop's own job commit, as the committer's {@code super.commitJob}. */
    public interface HadoopCommit {
        void run() throws IOException;
    }

    /** Hadoop's job set-up (make the job's directory), robust to another job of the table
     *  removing an empty {@code _temporary} (see {@link #remove}) between the creation of
     *  {@code _temporary} and of the job's directory in it: made again until it exists. */
    public static void setUp(FileOutputCommitter committer, JobContext context) throws IOException {
        Path mine = committer.getJobAttemptPath(context);
        FileSystem fs = mine.getFileSystem(context.getConfiguration());
        IOException last = null;
        for (int i = 0; i < 5; i++) {
            try {
                fs.mkdirs(mine);
            } catch (IOException raced) {  // made, then its parent removed before its chmod
                last = raced;
            }
            if (fs.exists(mine)) {
                return;
            }
        }
        throw last != null ? last : new IOException("zklock: cannot create " + mine);
    }

    /** {@link #remove} now and again after each of {@link #SETTLE_MS} (a failed job); not
     *  for a recorded batch whose files had begun to move: what is still staged is the rest
     *  of the batch, which its next run moves in (BatchLog.finish). */
    public static void removeNowAndLater(FileOutputCommitter committer, JobContext context)
            throws IOException {
        if (BatchLog.moving(committer, context)) {  // kept for the batch's finish (BatchLog)
            return;
        }
        Path mine = committer.getJobAttemptPath(context);
        Configuration conf = context.getConfiguration();
        remove(mine, conf);
        SETTLING.put(mine, conf);
        long last = SETTLE_MS[SETTLE_MS.length - 1];
        for (long delay : SETTLE_MS) {
            LATER.schedule(() -> {
                quietlyRemove(mine, conf);
                if (delay == last) {
                    SETTLING.remove(mine);
                }
            }, delay, TimeUnit.MILLISECONDS);
        }
    }

    private static void quietlyRemove(Path mine, Configuration conf) {
        try {
            remove(mine, conf);
        } catch (IOException | RuntimeException e) {
            // clutter no job reads (a stopped file system, a dropped table)
        }
    }

    /** Remove a job's own staging {@code mine}, then {@code _temporary} itself if no other
     *  job stages there (a non-recursive delete, which fails on a directory that is not
     *  empty). */
    static void remove(Path mine, Configuration conf) throws IOException {
        FileSystem fs = mine.getFileSystem(conf);
        fs.delete(mine, true);
        removeIfEmpty(fs, mine.getParent());
    }

    /** Remove {@code dir} only if it is empty, atomically: another job may create its own
     *  directory in it at any moment. HDFS's non-recursive delete is atomic in the NameNode;
     *  Hadoop's local file system checks and then deletes recursively (a race that removed
     *  another job's fresh directory, seen on local-cluster), so there the directory is
     *  removed with the system's rmdir, which refuses a directory that is not empty. */
    private static void removeIfEmpty(FileSystem fs, Path dir) {
        try {
            if (fs instanceof LocalFileSystem) {
                ((LocalFileSystem) fs).pathToFile(dir).delete();
            } else if (fs instanceof RawLocalFileSystem) {
                ((RawLocalFileSystem) fs).pathToFile(dir).delete();
            } else {
                fs.delete(dir, false);
            }
        } catch (IOException othersStaging) {
            // another job stages there: it removes its own, and then this directory
        }
    }
}
