// A statement's request to its lock client (EngineLockClient.java, lock_client.py): the
// planner's answer, and what an operator is shown of its holder (its text, user, application,
// command and objects; the scheduler's query id; the streaming query of a micro-batch), with
// how it waits, as its session set it (CarriedConf), and the releases sent before it (in
// order: Releases.java).
package zklock.engine;

import java.util.LinkedHashMap;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;

import zklock.Protocol;
import zklock.Protocol.Field;

final class LockRequests {
    private LockRequests() {
    }

    /** The request for {@code answer}'s locks, under {@code handle}, for the statement
     *  {@code statement} ({@code name} on {@code what}). */
    static String acquire(SparkSession session, EngineLockClient client, String handle,
                          JsonNode answer, String name, String what, String statement) {
        SparkContext sc = session.sparkContext();
        Map<String, Object> request = new LinkedHashMap<>();
        request.put(Field.VERSION, Protocol.Version.ENGINE);
        request.put(Field.HANDLE, handle);
        request.put(Field.ANSWER, answer);
        request.put(Field.STATEMENT, statement);
        request.put(Field.USER, ConnectTags.user(sc));
        request.put(Field.APPLICATION, sc.applicationId());
        request.put(Field.COMMAND, name);
        request.put(Field.OBJECTS, what);
        request.put(Field.QUERY_ID, sc.getLocalProperty(Protocol.Property.QUERY_ID));
        String stream = sc.getLocalProperty(Protocol.Property.STREAM);
        if (stream != null) {  // a micro-batch's block (stream/MicroBatch.java)
            request.put(Field.STREAM, stream);
        }
        request.put(Field.CONF, CarriedConf.of(session));
        ExecutionEnds.releaseEnded(sc);
        request.put(Field.RELEASES, Releases.takeFor(client));
        return Documents.write(request);
    }
}
