package zklock;

import java.io.IOException;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.JobStatus;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter;

import zklock.commit.Staging;

/**
 * Hadoop's FileOutputCommitter with a job clean-up (after a commit, and on abort) that
 * deletes only its own job's staging instead of the whole _temporary that concurrent jobs
 * writing the same table stage in (Staging), and a fenced job commit: it refuses to publish
 * the job's files once the statement's locks are lost (CommitFence). StagedCommitProtocol
 * puts it in place of Hadoop's.
 */
public class IsolatedFileOutputCommitter extends FileOutputCommitter {
    public IsolatedFileOutputCommitter(Path outputPath, TaskAttemptContext context)
            throws IOException {
        super(outputPath, context);
    }

    @Override
    public void setupJob(JobContext context) throws IOException {  // no super: see Staging
        Staging.setUp(this, context);  // Hadoop's: make the job's directory
    }

    @Override
    public void commitJob(JobContext context) throws IOException {
        Staging.commitJob(this, context, () -> publish(context));
    }

    /** What the commit does once fenced: Hadoop's job commit (the merge of the job's files
     *  into the output), and what a subclass's format adds to it. */
    protected void publish(JobContext context) throws IOException {
        super.commitJob(context);
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
