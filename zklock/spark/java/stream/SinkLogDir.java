// A file sink's log directory (_spark_metadata), as zklock's checkpoint file manager
// (adapters/LazySinkLogs.java) tells it apart: made with its first entry, never empty
// (each entry fenced as a commit is: LazySinkLogs); and a checkpoint's directory as it names
// it, not made before the query is.
package zklock.stream;

import java.io.IOException;
import java.io.UncheckedIOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

import zklock.Protocol;

public final class SinkLogDir {
    /** The directory of Spark's file-sink log, in the directory the sink writes. */
    public static final String NAME = "_spark_metadata";
    private static final SinkLogDir NONE = new SinkLogDir(null);

    private final Path dir;

    private SinkLogDir(Path dir) {
        this.dir = dir;
    }

    /** The log directory a manager made for {@code path} serves: {@code path} itself when
     *  it is a file sink's log (Spark makes one manager per log), else none. */
    public static SinkLogDir of(Path path) {
        return NAME.equals(path.getName()) ? new SinkLogDir(path) : NONE;
    }

    /** Is {@code path} the log directory? */
    public boolean is(Path path) {
        return dir != null && dir.equals(path);
    }

    /** Is {@code path} an entry of the log directory? */
    public boolean holds(Path path) {
        return dir != null && dir.equals(path.getParent());
    }

    /** The directory a checkpoint manager serves (a checkpoint's, one of its logs', a file
     *  sink's log), made by the first file written in it where it is not there yet:
     *  LazySinkLogs names a checkpoint's directory without making it, makes a sink's log with
     *  its first entry, and Spark 3.5's manager does not make a file's parent. Once there,
     *  it is not asked for again. */
    public static final class ServedDir {
        private final Path dir;
        private final Configuration conf;
        private volatile boolean made;

        public ServedDir(Path dir, Configuration conf) {
            this.dir = dir;
            this.conf = conf;
        }

        /** The directory, qualified by its file system (as Spark's managers name a
         *  checkpoint), not made. */
        public Path qualified() {
            try {
                return dir.getFileSystem(conf).makeQualified(dir);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        /** Make {@code file}'s directory where it is not there yet. */
        public void makeFor(Path file) {
            Path parent = file.getParent();
            if (made && parent.equals(dir)) {
                return;
            }
            try {
                FileSystem fs = parent.getFileSystem(conf);
                if (!fs.exists(parent)) {
                    fs.mkdirs(parent);
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            if (parent.equals(dir)) {
                made = true;
            }
        }
    }

    /** {@code conf} without zklock's manager: Spark's default then serves. */
    public static Configuration withoutLazyLogs(Configuration conf) {
        Configuration spark = new Configuration(conf);
        spark.unset(Protocol.Conf.CHECKPOINT_MANAGER);
        return spark;
    }
}
