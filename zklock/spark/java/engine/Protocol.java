// What the JVM module and zklock's Python agree on, read from the one file that defines it:
// zklock/spark/protocol.properties, which the build copies into the jar. A value written out
// here and again in Python would drift; this reads the same text Python reads.
package zklock;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

final class Protocol {
    private static final Properties VALUES = load();

    static final int ENGINE_VERSION = Integer.parseInt(get("engine.version"));
    static final int ANSWER_VERSION = Integer.parseInt(get("answer.version"));
    static final int CONNECT_PROTOCOL = Integer.parseInt(get("connect.protocol"));
    static final String FENCING_TOKEN = get("property.fencing_token");
    static final String FENCE_ZOOKEEPER = get("property.fence_zookeeper");
    static final String FENCE_NODES = get("property.fence_nodes");
    static final String QUERY_ID = get("property.query_id");
    static final String FENCE_TAG = get("tag.fence");
    static final String FENCE_REFUSED = get("fence.refused");
    static final String REFUSED = get("condition.refused");
    static final String DENIED = get("condition.denied");
    static final String LOST = get("condition.lost");
    static final String UNAVAILABLE = get("condition.unavailable");
    static final String WRITE_FAILED = get("condition.write_failed");
    static final String UNKNOWN_STATEMENTS = get("setting.unknown_statements");
    static final String ENGINE_MODE = get("setting.engine_mode");
    static final String ENGINE_READS = get("setting.engine_reads");
    static final String LOCK_CLIENT = get("conf.lock_client");
    static final String LOCK_CLIENT_PYTHON = get("conf.lock_client_python");
    static final String LOCK_CLIENT_STATUS_FILE = get("conf.lock_client_status_file");
    static final String ISOLATE_COMMITS = get("setting.isolate_commits");
    static final String COMMIT_PROTOCOL = get("conf.commit_protocol");
    static final String COMMIT_PROTOCOL_CLASS = get("class.commit_protocol");

    private Protocol() {
    }

    private static Properties load() {
        Properties values = new Properties();
        try (InputStream in = Protocol.class.getResourceAsStream("/zklock/protocol.properties")) {
            if (in == null) {
                throw new IllegalStateException("zklock's jar has no zklock/protocol.properties");
            }
            values.load(in);
        } catch (IOException e) {
            throw new IllegalStateException("zklock's protocol.properties: " + e, e);
        }
        return values;
    }

    private static String get(String key) {
        String value = VALUES.getProperty(key);
        if (value == null) {
            throw new IllegalStateException("zklock's protocol.properties has no " + key);
        }
        return value;
    }
}
