// A catalog table's location, and deleting a directory under it with Hadoop's FileSystem:
// what zklock/spark/commit.py needs to remove an application's commit staging after a write,
// in one JVM call each (through py4j each Scala accessor is a round trip of its own).
package zklock;

import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.catalog.SessionCatalog;
import org.apache.spark.sql.SparkSession;

public final class TableFiles {
    private final SessionCatalog catalog;
    private final Configuration hadoopConf;

    public TableFiles(SparkSession session) {
        this.catalog = session.sessionState().catalog();
        this.hadoopConf = session.sparkContext().hadoopConfiguration();
    }

    /** The table's storage location URI; null for a missing table or one without. */
    public String location(String db, String table) throws Exception {
        TableIdentifier ident = new TableIdentifier(table, scala.Option.apply(db));
        if (!catalog.tableExists(ident)) {
            return null;
        }
        scala.Option<java.net.URI> uri = catalog.getTableMetadata(ident).storage().locationUri();
        return uri.isDefined() ? uri.get().toString() : null;
    }

    /** Delete {@code path} and everything below it; false when it was not there. */
    public boolean delete(String path) throws IOException {
        Path target = new Path(path);
        return target.getFileSystem(hadoopConf).delete(target, true);
    }
}
