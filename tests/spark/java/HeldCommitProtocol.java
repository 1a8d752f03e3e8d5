// zklock's commit protocol, held by a test at a point of a write job so that the test can
// lose the job's locks exactly there. Compiled by the tests (tests/spark/held_commits.py),
// never part of zklock's jar: production code carries no test hook.
package zklock.tests;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.TimeUnit;

import org.apache.hadoop.mapreduce.JobContext;
import org.apache.spark.internal.io.FileCommitProtocol;

import zklock.StagedCommitProtocol;

public class HeldCommitProtocol extends StagedCommitProtocol {
    private static final long serialVersionUID = 1L;
    /** Names the file that holds a job at its setup: the command runs under its granted
     *  locks, before its first job. */
    public static final String AT_SETUP = "zklock.tests.holdSetup";
    /** Names the file that holds a job at its commit: every task done, before the
     *  committers' fence check. */
    public static final String AT_COMMIT = "zklock.tests.holdCommit";

    public HeldCommitProtocol(String jobId, String path, boolean dynamicPartitionOverwrite) {
        super(jobId, path, dynamicPartitionOverwrite);
    }

    @Override
    public void setupJob(JobContext job) {
        hold(AT_SETUP);
        super.setupJob(job);
    }

    @Override
    public void commitJob(JobContext job, SEQ<FileCommitProtocol.TaskCommitMessage> commits) {
        hold(AT_COMMIT);
        super.commitJob(job, commits);
    }

    /** While the file the property names exists (at most two minutes), after creating
     *  "file.held" for the test to see. */
    private static void hold(String property) {
        String file = System.getProperty(property);
        if (file == null) {
            return;
        }
        Path hold = Paths.get(file);
        try {
            Files.write(Paths.get(file + ".held"), new byte[0]);
            long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(2);
            while (Files.exists(hold) && System.nanoTime() < deadline) {
                Thread.sleep(20);  // poll: the test removes the file
            }
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while held at " + property, e);
        }
    }
}
