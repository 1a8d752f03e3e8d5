// What a Spark Connect operation's job tags say about the statement a thread runs: Spark
// Connect tags an operation's jobs SparkConnect_OperationTag_User_<user>_Session_<id>_
// Operation_<id>, and, for each tag its client added, ..._Tag_<tag>. zklock reads the user
// and session from the first, and the block a LockingSession's operation runs in from the tag
// Protocol.Tag.BLOCK that its client adds (ConnectBlocks).
package zklock.engine;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.catalyst.CurrentUserContext$;

import scala.collection.Iterator;

import zklock.Protocol;

final class ConnectTags {
    private static final String PREFIX = "SparkConnect_";
    private static final String CLIENT_TAG = "_Tag_";

    private ConnectTags() {
    }

    /** The part between {@code from} and {@code to} of the job tag Spark Connect gives the
     *  operation running this thread's jobs; null outside one. */
    static String part(SparkContext sc, String from, String to) {
        Iterator<String> tags = sc.getJobTags().iterator();
        while (tags.hasNext()) {
            String tag = tags.next();
            int at = tag.indexOf(from);
            int end = tag.indexOf(to);
            if (tag.startsWith(PREFIX) && at >= 0 && end > at) {
                return tag.substring(at + from.length(), end);
            }
        }
        return null;
    }

    /** The Spark Connect session running this thread's jobs; null outside one. */
    static String session(SparkContext sc) {
        return part(sc, "_Session_", "_Operation_");
    }

    /** The user a statement runs for, where it is not this process's: a Spark Connect
     *  client's (from its operation's job tag), else the one Spark sets for SQL's
     *  current_user() (a JDBC client of Spark's Thrift server); null otherwise. */
    static String user(SparkContext sc) {
        String user = part(sc, "_User_", "_Session_");
        return user != null ? user : CurrentUserContext$.MODULE$.CURRENT_USER().get();
    }

    /** The id of the block a Spark Connect client's operation runs in (its tag
     *  Protocol.Tag.BLOCK, ConnectBlocks); null outside one. */
    static String block(SparkContext sc) {
        String marker = CLIENT_TAG + Protocol.Tag.BLOCK;
        Iterator<String> tags = sc.getJobTags().iterator();
        while (tags.hasNext()) {
            String tag = tags.next();
            int at = tag.indexOf(marker);
            if (tag.startsWith(PREFIX) && at >= 0) {
                return tag.substring(at + marker.length());
            }
        }
        return null;
    }
}
