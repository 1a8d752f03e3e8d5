// The job-tag helpers of a locked statement in a classic session: tag the thread's next jobs
// with the statement's query id (cancelled by tag when its locks are lost), and set the local
// properties that carry the set's fencing token and tell zklock's committers which lock nodes
// must still exist when the job commits (CommitFence.java). One py4j call each way instead
// of five (zklock/spark/locked_statement.py).
package zklock;

import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaSparkContext;

public final class JobTags {
    /** The local property carrying the lock set's fencing token to every job. */
    public static final String FENCING_TOKEN = Protocol.FENCING_TOKEN;

    private final SparkContext sc;

    public JobTags(JavaSparkContext jsc) {
        this.sc = jsc.sc();
    }

    public void enter(String tag, String token, String zookeeper, String nodes) {
        sc.addJobTag(tag);
        sc.setLocalProperty(FENCING_TOKEN, token);
        sc.setLocalProperty(CommitFence.ZOOKEEPER, zookeeper);
        sc.setLocalProperty(CommitFence.NODES, nodes);
    }

    public void exit(String tag) {
        sc.removeJobTag(tag);
        sc.setLocalProperty(FENCING_TOKEN, null);
        sc.setLocalProperty(CommitFence.ZOOKEEPER, null);
        sc.setLocalProperty(CommitFence.NODES, null);
    }
}
