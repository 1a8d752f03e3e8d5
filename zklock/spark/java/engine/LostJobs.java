// Cancels every job of a statement whose locks are lost, including jobs it starts after the
// loss. SparkContext.cancelJobsWithTag reaches only the jobs running at that moment; a loss
// between a grant and the statement's first job (a lock node deleted, a session expired, the
// child lock client dead: every lock client cancels through here) would otherwise let that
// job run. So the lost tags are remembered, and a listener cancels any
// job that starts carrying one. The listener bus delivers the start a moment after the job
// began: a task may run before the cancel, and the commit fence (CommitFence.abandon) keeps
// its output from ever becoming visible.
package zklock.engine;

import java.util.Collections;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;

public final class LostJobs extends SparkListener {
    /** The property that carries a job's tags, comma-separated (SparkContext.SPARK_JOB_TAGS). */
    private static final String JOB_TAGS = "spark.job.tags";
    private static final Map<SparkContext, LostJobs> LISTENERS =
        Collections.synchronizedMap(new WeakHashMap<>());

    private final SparkContext sc;
    private final Set<String> lost = ConcurrentHashMap.newKeySet();

    private LostJobs(SparkContext sc) {
        this.sc = sc;
    }

    /** The statement tagged {@code tag} lost its locks: cancel its jobs, now and later. */
    public static void cancel(SparkContext sc, String tag) {
        LostJobs jobs;
        synchronized (LISTENERS) {
            jobs = LISTENERS.get(sc);
            if (jobs == null) {
                jobs = new LostJobs(sc);
                sc.addSparkListener(jobs);
                LISTENERS.put(sc, jobs);
            }
        }
        jobs.lost.add(tag);
        sc.cancelJobsWithTag(tag);
    }

    @Override
    public void onJobStart(SparkListenerJobStart start) {
        String tags = start.properties() == null ? null : start.properties().getProperty(JOB_TAGS);
        if (tags == null) {
            return;
        }
        for (String tag : tags.split(",")) {
            if (lost.contains(tag)) {
                sc.cancelJob(start.jobId());
                return;
            }
        }
    }
}
