package zklock;

import java.io.IOException;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.parquet.hadoop.ParquetOutputCommitter;

/**
 * Parquet's committer (what Spark uses for parquet tables) with IsolatedFileOutputCommitter's
 * job clean-up (only its own _temporary/<application attempt id> is deleted) and fenced job
 * commit (refused once the statement's locks are lost: CommitFence).
 */
public class IsolatedParquetOutputCommitter extends ParquetOutputCommitter {
    public IsolatedParquetOutputCommitter(Path outputPath, TaskAttemptContext context)
            throws IOException {
        super(outputPath, context);
    }

    @Override
    public void commitJob(JobContext context) throws IOException {
        CommitFence.check();  // last thing before the job's files become visible
        super.commitJob(context);
    }

    @Override
    public void cleanupJob(JobContext context) throws IOException {
        IsolatedFileOutputCommitter.deleteOwnAttempt(this, context);
    }
}
