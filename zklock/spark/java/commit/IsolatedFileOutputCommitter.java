package zklock;

import java.io.IOException;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter;

/**
 * A FileOutputCommitter whose job clean-up (after a commit, and on abort) deletes only its
 * own job attempt directory, _temporary/<application attempt id>, instead of the whole
 * _temporary that concurrent applications writing the same table stage in, and whose job
 * commit is fenced: it refuses to publish the job's files once the statement's locks are
 * lost (CommitFence). See zklock/spark/commit.py.
 */
public class IsolatedFileOutputCommitter extends FileOutputCommitter {
    public IsolatedFileOutputCommitter(Path outputPath, TaskAttemptContext context)
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
        deleteOwnAttempt(this, context);
    }

    /** The job clean-up of both zklock committers: this job attempt's directory only. */
    static void deleteOwnAttempt(FileOutputCommitter committer, JobContext context)
            throws IOException {
        Path mine = committer.getJobAttemptPath(context);
        mine.getFileSystem(context.getConfiguration()).delete(mine, true);
    }
}
