package zklock;

import java.io.IOException;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.OutputCommitter;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter;
import org.apache.parquet.hadoop.ParquetOutputCommitter;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol;

import zklock.commit.BatchLog;
import zklock.commit.Staging;
import zklock.commit.WriteOutcome;

/**
 * Spark's commit protocol for file writes, with staging of its own for every write job.
 *
 * <p>Spark stages an append or a static-partition insert under {@code <table>/_temporary/0}
 * (Hadoop's FileOutputCommitter names the directory after the application attempt id, 0
 * outside YARN), shared by every job of every application writing the table; each job
 * commit merges every committed task it finds there and then deletes the whole directory.
 * zklock lets writers of different partitions of one table run at once, so one job's commit
 * would publish or delete another's staged files. Here each job stages under
 * {@code _temporary/<an attempt id of its own>}, derived from the job id Spark gives this
 * protocol (a new UUID per write command), on the driver and on every executor alike, since
 * the protocol is serialized to the tasks with its fields. Spark's dynamic partition
 * overwrite stages per job already ({@code .spark-staging-<job id>}); Hive-format tables
 * stage per query ({@code .hive-staging_...}): both keep that, with the job's own attempt
 * inside.
 *
 * <p>Hadoop's committers delete the whole {@code _temporary} when a job ends (after a
 * commit unless told to skip it, and always on abort): they are replaced by zklock's
 * (isolated, below), which delete only their job's directory and fence the job commit
 * (CommitFence). Configured by {@code spark.sql.sources.commitProtocolClass}, which
 * zklock's plugin (EnginePlugin) and {@code zklock.spark.configure} set; {@code spark.zklock.isolateCommits
 * =false} (the session's conf, as every SQL setting reaches a job's Hadoop conf) turns it
 * into Spark's own protocol.
 */
public class StagedCommitProtocol extends SQLHadoopMapReduceCommitProtocol {
    private static final long serialVersionUID = 1L;
    /** Hadoop's setting naming the job attempt's staging directory under _temporary. */
    static final String ATTEMPT_ID = "mapreduce.job.application.attempt.id";
    /** Hadoop's setting that keeps FileOutputCommitter's commit from deleting _temporary. */
    static final String SKIP_CLEANUP = "mapreduce.fileoutputcommitter.cleanup.skipped";

    /** Every file write of every session of this application stages in a directory of its
     *  own (StagedCommitProtocol), whatever client sent it, and no stream's file sink makes an
     *  empty log in a table's directory (LazySinkLogs): both become the application's
     *  defaults (its SparkConf, which each new session's SQL conf starts from), unless the
     *  application names others. EnginePlugin does it as the SparkContext starts, before any
     *  session exists; zklock.spark.configure names both in a builder.
     *
     *  Spark checks that each new session can load the class named there, with its thread's
     *  class loader. A Thrift server's JDBC sessions run with Hive's session class loader,
     *  whose parent is the JVM's own class path, not Spark's loader of spark.jars: there
     *  zklock's jar must be on the driver's class path (spark.driver.extraClassPath, as
     *  `zklock spark thrift-server start` puts it), or every JDBC session would fail to
     *  open. Without it, the default is not set, and the server says why in one line. */
    static void becomeDefault(SparkContext sc) {
        boolean thriftServer = String.valueOf(System.getProperty("sun.java.command"))
            .contains("thriftserver.HiveThriftServer2");
        if (thriftServer && !onDriverClassPath()) {
            System.err.println("zklock: zklock's jar is not on this Thrift server's driver class"
                + " path (spark.driver.extraClassPath): its JDBC sessions cannot load zklock's"
                + " classes, and their writes do not stage per job (docs/deploy.md)");
            return;
        }
        sc.conf().setIfMissing(Protocol.Conf.COMMIT_PROTOCOL, Protocol.JvmClass.COMMIT_PROTOCOL);
        // and a file sink's log is made with its first entry (adapters/LazySinkLogs.java)
        sc.conf().setIfMissing(Protocol.Conf.CHECKPOINT_MANAGER,
            Protocol.JvmClass.CHECKPOINT_MANAGER);
    }

    private static boolean onDriverClassPath() {
        try {
            Class.forName(Protocol.JvmClass.COMMIT_PROTOCOL, false,
                ClassLoader.getSystemClassLoader());
            return true;
        } catch (ClassNotFoundException e) {
            return false;
        }
    }

    private final int attempt;
    /** The id Spark names the job's files by ({@code part-00000-<id>...}). */
    private final String jobId;

    public StagedCommitProtocol(String jobId, String path, boolean dynamicPartitionOverwrite) {
        super(jobId, path, dynamicPartitionOverwrite);
        this.attempt = attemptOf(jobId);
        this.jobId = jobId;
    }

    /** The job's staging directory name: a positive int (Hadoop reads the attempt id as one)
     *  drawn from the job's UUID. Two jobs of one table meet only if two of 2^31 ids collide
     *  while both run. */
    static int attemptOf(String jobId) {
        long bits;
        try {
            UUID id = UUID.fromString(jobId);
            bits = id.getMostSignificantBits() ^ id.getLeastSignificantBits();
        } catch (IllegalArgumentException notUuid) {
            bits = jobId.hashCode() * 0x9E3779B97F4A7C15L;
        }
        return 1 + (int) Math.floorMod(bits ^ (bits >>> 31), (long) Integer.MAX_VALUE - 1);
    }

    private boolean isolated(Configuration conf) {
        return "true".equals(Protocol.ISOLATE_COMMITS.check(conf.get(Protocol.ISOLATE_COMMITS.key)));
    }

    @Override
    public void setupJob(JobContext job) {
        WriteOutcome.jobSetUp();
        if (isolated(job.getConfiguration())) {
            stage(job.getConfiguration());
        }
        super.setupJob(job);
    }

    @Override
    public OutputCommitter setupCommitter(TaskAttemptContext context) {
        Configuration conf = context.getConfiguration();
        if (!isolated(conf)) {
            return super.setupCommitter(context);
        }
        stage(conf);  // before the committer computes its paths from it
        OutputCommitter committer;
        try {
            committer = isolated(super.setupCommitter(context), context);
            if (committer instanceof IsolatedFileOutputCommitter) {
                WriteOutcome.committerSetUp();  // counted on the driver's thread only
            } else if (committer instanceof FileOutputCommitter) {
                // another FileOutputCommitter would delete the whole _temporary, which other
                // jobs stage in: made again, told to skip its clean-up
                conf.setBoolean(SKIP_CLEANUP, true);
                committer = super.setupCommitter(context);
            }
        } catch (IOException e) {
            throw new IllegalStateException("zklock: cannot make the job's committer: " + e, e);
        }
        return committer;
    }

    /** This job's staging, in the conf every committer of the job reads its paths from.
     *  Hadoop's cleanup.skipped is not set for zklock's own committers, whose clean-up
     *  removes only their job's staging: with it, every FileOutputCommitter made warns
     *  that skipping the clean-up "can lead to unexpected behaviors" (docs/design.md). */
    private void stage(Configuration conf) {
        conf.setInt(ATTEMPT_ID, attempt);
        conf.set(BatchLog.FILES_NAMED_BY, jobId);  // a recorded batch's (BatchLog.pending)
    }

    /** zklock's committer in place of Hadoop's FileOutputCommitter or Parquet's: the same,
     *  but removing only its own job's staging. Any other committer is kept as it is (it
     *  stages under the job's own attempt all the same, but may clean up more than its own:
     *  docs/spark.md). */
    private static OutputCommitter isolated(OutputCommitter committer, TaskAttemptContext context)
            throws IOException {
        if (committer == null) {
            return null;
        }
        Class<?> kind = committer.getClass();
        if (kind == FileOutputCommitter.class) {
            return new IsolatedFileOutputCommitter(
                ((FileOutputCommitter) committer).getOutputPath(), context);
        }
        if (kind == ParquetOutputCommitter.class) {
            return new IsolatedParquetOutputCommitter(
                ((FileOutputCommitter) committer).getOutputPath(), context);
        }
        return committer;
    }
}
