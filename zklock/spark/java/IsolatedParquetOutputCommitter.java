package zklock;

import java.io.IOException;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.JobStatus;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.parquet.hadoop.ParquetOutputCommitter;

import zklock.commit.Staging;

/**
 * Parquet's committer (what Spark uses for parquet tables) with IsolatedFileOutputCommitter's
 * removal of only its own job's staging (Staging) and fenced job commit (CommitFence).
 */
public class IsolatedParquetOutputCommitter extends ParquetOutputCommitter {
    public IsolatedParquetOutputCommitter(Path outputPath, TaskAttemptContext context)
            throws IOException {
        super(outputPath, context);
    }

    @Override
    public void setupJob(JobContext context) throws IOException {  // no super: see Staging
        Staging.setUp(this, context);  // Hadoop's: make the job's directory
    }

    @Override
    public void commitJob(JobContext context) throws IOException {
        Staging.commitJob(this, context, () -> super.commitJob(context));
    }

    /** Hadoop's commitJob calls it after the merge: nothing to do there, since
     *  Staging.commitJob removes the job's own staging once the commit is recorded. */
    @Override
    public void cleanupJob(JobContext context) {
    }

    @Override
    public void abortJob(JobContext context, JobStatus.State state) throws IOException {
        Staging.removeNowAndLater(this, context);
    }
}
