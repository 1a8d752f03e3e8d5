// Declarative pipelines' runs, locked as they start, from Spark 4.1 on (PipelineRuns.java):
// before 4.1 Spark has no pipelines, and nothing to register. Also the copy compiled for a
// Spark 4.1+ whose jars lack its Connect server (jvm.py: the interceptor needs its classes):
// there no pipeline can run, unless the application brings the Connect server itself
// (--packages), when pipeline runs would go unlocked: refused as the application starts.
// An adapter: zklock/spark/jvm.py compiles the newest copy not newer than the installed Spark.
package zklock.adapters;

import org.apache.spark.SparkContext;

public final class PipelineStarts {
    /** Spark's Connect service, which serves declarative pipelines' runs from 4.1 on. */
    private static final String CONNECT_SERVICE =
        "org.apache.spark.sql.connect.service.SparkConnectService";

    private PipelineStarts() {
    }

    /** Nothing to register: no pipeline runs here. A Spark 4.1+ with a Connect server this
     *  copy was built without is refused in one line (IllegalStateException). */
    public static void register(SparkContext sc) {
        String[] version = sc.version().split("[.-]");
        int major = Integer.parseInt(version[0]);
        int minor = Integer.parseInt(version[1]);
        if ((major > 4 || major == 4 && minor >= 1) && present(CONNECT_SERVICE)) {
            throw new IllegalStateException("zklock: this Spark " + sc.version() + " has a Spark"
                + " Connect server, which zklock's jar was built without (its pipeline runs"
                + " would go unlocked): build zklock's jar where Spark's jars hold the Connect"
                + " server's (zklock spark jar), or leave the server out");
        }
    }

    private static boolean present(String name) {
        try {
            Class.forName(name, false, Thread.currentThread().getContextClassLoader());
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }
}
