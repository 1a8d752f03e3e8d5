// The committer of RDD saves (saveAsTextFile, saveAsHadoopFile, saveAsSequenceFile,
// saveAsObjectFile: Hadoop's old mapred API, which Spark's SQL engine never sees). Spark asks
// the job's JobConf for it by name (mapred.output.committer.class, which
// zklock.spark.configure sets through spark.hadoop.*).
//
// An RDD save carries no lock plan: zklock cannot tell what it reads, and it is not a
// statement the engine extension runs. So its job commit, the last thing before its files
// become visible, refuses an output directory that is, lies in, or contains a catalog table's
// directory (a write to that table without its X lock), unless the job runs inside a locked
// statement whose lock nodes still exist (CommitFence). A save anywhere else commits as
// Hadoop's FileOutputCommitter does.
package zklock;

import java.io.IOException;
import java.util.List;

import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapred.FileOutputCommitter;
import org.apache.hadoop.mapred.FileOutputFormat;
import org.apache.hadoop.mapred.JobContext;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkContext$;
import org.apache.spark.sql.SparkSession;

import zklock.commit.CommitFence;
import zklock.planner.CatalogTargets;
import zklock.planner.LockAnswer;

import org.apache.spark.sql.SparkSession$;

public class FencedMapredOutputCommitter extends FileOutputCommitter {
    @Override
    public void commitJob(JobContext context) throws IOException {
        refuseUnlockedTableWrite(FileOutputFormat.getOutputPath(context.getJobConf()));
        super.commitJob(context);
    }

    private static void refuseUnlockedTableWrite(Path output) throws IOException {
        SparkContext sc = SparkContext$.MODULE$.getActive().getOrElse(() -> null);
        if (output == null || sc == null) {
            return;
        }
        String fenced = sc.getLocalProperty(CommitFence.NODES);
        if (fenced != null && !fenced.isEmpty()) {
            CommitFence.check();  // inside a locked statement: its locks must still exist
            return;
        }
        SparkSession session = session();
        if (session == null) {
            return;  // no catalog in this application: no table to protect
        }
        List<LockAnswer.Target> tables =
            new CatalogTargets(session).tablesAt(output.toString());
        if (!tables.isEmpty()) {
            LockAnswer.Target t = tables.get(0);
            throw new IOException("zklock: refused an RDD save to " + output + ": it writes"
                + " the files of " + t.db + "." + t.table + " without its X lock (RDD saves"
                + " carry no locks); write through a DataFrame or SQL instead");
        }
    }

    private static SparkSession session() {
        scala.Option<SparkSession> s = SparkSession$.MODULE$.getActiveSession();
        if (s.isEmpty()) {
            s = SparkSession$.MODULE$.getDefaultSession();
        }
        return s.isDefined() ? s.get() : null;
    }
}
