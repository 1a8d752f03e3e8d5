package zklock;

import java.io.IOException;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.parquet.hadoop.ParquetOutputCommitter;

/**
 * IsolatedFileOutputCommitter for Parquet tables, where Spark would use Parquet's committer:
 * what Parquet's adds to Hadoop's, the job's summary files (`_metadata`, written only where
 * `parquet.summary.metadata.level` asks for them; Spark turns them off by default), is
 * written as part of the fenced commit, as Parquet's own commitJob writes them after
 * Hadoop's. (Spark warns that a committer not derived from Parquet's cannot write the
 * summaries, where they are asked for; this one writes them.)
 */
public class IsolatedParquetOutputCommitter extends IsolatedFileOutputCommitter {
    public IsolatedParquetOutputCommitter(Path outputPath, TaskAttemptContext context)
            throws IOException {
        super(outputPath, context);
    }

    @Override
    protected void publish(JobContext context) throws IOException {
        super.publish(context);
        ParquetOutputCommitter.writeMetaDataFile(context.getConfiguration(), getOutputPath());
    }
}
