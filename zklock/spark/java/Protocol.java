// What the JVM module and zklock's Python agree on, read from the one file that defines it:
// zklock/spark/protocol.properties, which the build copies into the jar. A value written out
// here and again in Python would drift; this reads the same text Python reads.
package zklock;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

public final class Protocol {
    private static final Properties VALUES = load();

    public static final int ENGINE_VERSION = Integer.parseInt(get("engine.version"));
    public static final int ANSWER_VERSION = Integer.parseInt(get("answer.version"));
    public static final int CONNECT_PROTOCOL = Integer.parseInt(get("connect.protocol"));
    public static final String FENCING_TOKEN = get("property.fencing_token");
    public static final String FENCE_ZOOKEEPER = get("property.fence_zookeeper");
    public static final String FENCE_NODES = get("property.fence_nodes");
    public static final String QUERY_ID = get("property.query_id");
    public static final String STREAM = get("property.stream");
    public static final String FENCE_TAG = get("tag.fence");
    public static final String FENCE_REFUSED = get("fence.refused");
    public static final String REFUSED = get("condition.refused");
    public static final String DENIED = get("condition.denied");
    public static final String LOST = get("condition.lost");
    public static final String UNAVAILABLE = get("condition.unavailable");
    public static final String WRITE_FAILED = get("condition.write_failed");
    public static final String COMMIT_PROTOCOL = get("conf.commit_protocol");
    public static final String COMMIT_PROTOCOL_CLASS = get("class.commit_protocol");
    public static final String CHECKPOINT_MANAGER = get("conf.checkpoint_manager");
    public static final String CHECKPOINT_MANAGER_CLASS = get("class.checkpoint_manager");
    public static final String EXTENSION_CLASS = get("class.extension");
    public static final String PLUGIN_CLASS = get("class.plugin");

    /** The session conf keys the engine carries with each lock request (config.py's
     *  carried settings: how a statement waits), for its lock client to read. */
    public static final java.util.List<String> CARRIED_KEYS =
        java.util.Arrays.asList(get("carried.keys").split(","));
    private static final java.util.List<String> TRUE_WORDS =
        java.util.Arrays.asList(get("boolean.true").split(","));
    private static final java.util.List<String> FALSE_WORDS =
        java.util.Arrays.asList(get("boolean.false").split(","));

    public static final Setting UNKNOWN_STATEMENTS = new Setting("unknown_statements");
    public static final Setting ENGINE_MODE = new Setting("engine_mode");
    public static final Setting ENGINE_READS = new Setting("engine_reads");
    public static final Setting STREAM_LOCK_LOST = new Setting("stream_lock_lost");
    public static final Setting ISOLATE_COMMITS = new Setting("isolate_commits");
    public static final Setting LOCK_CLIENT = new Setting("lock_client");
    public static final Setting LOCK_CLIENT_PYTHON = new Setting("lock_client_python");
    public static final Setting LOCK_CLIENT_STATUS_FILE = new Setting("lock_client_status_file");

    public static final String ACQUIRE = get("call.acquire");
    public static final String VERIFY = get("call.verify");
    public static final String RELEASE = get("call.release");
    public static final String PARSE = get("call.parse");
    public static final String GRANTED = get("outcome.granted");
    public static final String UNLOCKED = get("outcome.unlocked");
    public static final String OUTCOME_DENIED = get("outcome.denied");
    public static final String OUTCOME_REFUSED = get("outcome.refused");
    public static final String OUTCOME_UNAVAILABLE = get("outcome.unavailable");
    public static final String COVERED = get("outcome.covered");
    public static final String RELEASED = get("outcome.released");
    public static final String OUTCOME_LOST = get("outcome.lost");
    public static final String PARSED = get("outcome.parsed");
    public static final String STATEMENT_LOCK = get("statement.lock");
    public static final String STATEMENT_UNLOCK = get("statement.unlock");
    public static final String EVENT_READY = get("event.ready");
    public static final String EVENT_LOST = get("event.lost");
    public static final String EVENT_WAITING = get("event.waiting");
    public static final String KIND_COMMAND = get("kind.command");
    public static final String KIND_QUERY = get("kind.query");
    public static final String KIND_REFUSED = get("kind.refused");
    public static final String REFUSAL_UNSUPPORTED = get("refusal.unsupported");
    public static final String REFUSAL_INVALID_ARGUMENTS = get("refusal.invalid_arguments");
    public static final String REFUSAL_INCOMPATIBLE = get("refusal.incompatible");
    public static final String CONNECT_TYPE_URL = get("connect.type_url");


    /** The fields of the JSON documents that cross between Python and the JVM. */
    public static final class Field {
        // the lock client's requests and answers (EngineLockClient.java, lock_client.py)
        public static final String VERSION = get("field.version");
        public static final String OUTCOME = get("field.outcome");
        public static final String MESSAGE = get("field.message");
        public static final String HANDLE = get("field.handle");
        public static final String QUERY_ID = get("field.query_id");
        public static final String TOKEN = get("field.token");
        public static final String ATTEMPTS = get("field.attempts");
        public static final String WAITED_FOR = get("field.waited_for");
        public static final String SOLE = get("field.sole");
        public static final String ZOOKEEPER = get("field.zookeeper");
        public static final String NODES = get("field.nodes");
        public static final String RELEASES = get("field.releases");
        public static final String OBJECTS = get("field.objects");
        public static final String ANSWER = get("field.answer");
        public static final String STATEMENT = get("field.statement");
        public static final String USER = get("field.user");
        public static final String APPLICATION = get("field.application");
        public static final String COMMAND = get("field.command");
        public static final String STREAM = get("field.stream");
        public static final String DATABASE = get("field.database");
        // the planner's answer and its targets (LockAnswer.java, answer.py)
        public static final String KIND = get("field.kind");
        public static final String TARGETS = get("field.targets");
        public static final String DB = get("field.db");
        public static final String TABLE = get("field.table");
        public static final String PARTITION = get("field.partition");
        public static final String MODE = get("field.mode");
        public static final String NOTES = get("field.notes");
        public static final String RECHECK = get("field.recheck");
        public static final String WHOLE = get("field.whole");
        public static final String REFUSAL = get("field.refusal");
        // what a lock client says of itself (ClientProfile.java, lock_client.py)
        public static final String SPACE = get("field.space");
        public static final String SETTINGS = get("field.settings");
        public static final String VALUE = get("field.value");
        public static final String OVER_SPARK_CONF = get("field.over_spark_conf");
        // the child lock client's pipe (ChildLockClient.java, lock_process.py)
        public static final String CONF = get("field.conf");
        public static final String HADOOP = get("field.hadoop");
        public static final String ABANDONED = get("field.abandoned");
        public static final String ID = get("field.id");
        public static final String CALL = get("field.call");
        public static final String REQUEST = get("field.request");
        public static final String FAILED = get("field.failed");
        public static final String REPLY = get("field.reply");
        public static final String EVENT = get("field.event");
        public static final String PID = get("field.pid");
        public static final String PROFILE = get("field.profile");
        // the Spark Connect plugin's requests (ConnectLockPlugin.java, connect.py)
        public static final String PROTOCOL = get("field.protocol");
        public static final String OP = get("field.op");
        public static final String SQL = get("field.sql");
        public static final String STRICT = get("field.strict");
        public static final String UNKNOWN_STATEMENTS = get("field.unknown_statements");
        public static final String RELATION = get("field.relation");
        public static final String CLIENT = get("field.client");
        public static final String BUILD = get("field.build");
        // the child lock client's status, for operators (ChildSupervisor.java, cli/thrift_server.py)
        public static final String UP = get("field.up");
        public static final String RESTARTS = get("field.restarts");
        public static final String LAST_ERROR = get("field.last_error");
        public static final String FAILURES_IN_A_ROW = get("field.failures_in_a_row");
        public static final String UPDATED_MS = get("field.updated_ms");

        private Field() {
        }
    }

    /** The operations of the Spark Connect plugin's requests. */
    public static final class Op {
        public static final String PLAN = get("op.plan");
        public static final String WRITE = get("op.write");
        public static final String VERSION = get("op.version");

        private Op() {
        }
    }

    /** One of zklock's settings the JVM module reads: a row of zklock/config.py's SETTINGS,
     *  as the build appended it to the jar's copy of this file (its Spark conf key,
     *  environment variable, default and choices). */
    public static final class Setting {
        public final String name;
        /** Its Spark conf key. */
        public final String key;
        private final String env;
        private final String fallback;
        private final java.util.List<String> choices;
        /** A boolean setting: {@link #check} answers "true" or "false". */
        private final boolean flag;

        private Setting(String name) {
            this.name = name;
            this.key = get("setting." + name);
            this.env = get("env." + name);
            String d = get("default." + name);
            this.fallback = d.isEmpty() ? null : d;
            String c = VALUES.getProperty("choices." + name);
            this.choices = c == null ? null : java.util.Arrays.asList(c.split(","));
            this.flag = VALUES.getProperty("boolean." + name) != null;
        }

        /** {@code value} (null: unset) as the setting's: else the environment's, else the
         *  default (null when it has none); one of its choices, lower-case, where it has
         *  them: IllegalArgumentException naming the key for anything else (a typo must not
         *  turn locks off). */
        public String check(String value) {
            String v = value != null ? value : System.getenv(env);
            if (v == null || v.trim().isEmpty()) {
                return fallback;
            }
            String word = v.trim().toLowerCase(java.util.Locale.ROOT);
            java.util.List<String> allowed = choices;
            if (flag) {
                if (TRUE_WORDS.contains(word)) {
                    return "true";
                }
                if (FALSE_WORDS.contains(word)) {
                    return "false";
                }
                allowed = java.util.Arrays.asList("true", "false");
            } else if (choices == null) {
                return v.trim();
            }
            if (!allowed.contains(word)) {
                int last = allowed.size() - 1;
                throw new IllegalArgumentException("zklock: " + key + " is "
                    + String.join(", ", allowed.subList(0, last)) + " or " + allowed.get(last)
                    + ", not '" + v + "'");
            }
            return word;
        }

        /** {@link #check} for a statement: a value outside the choices is the engine's
         *  refusal, in one line. */
        public String refusing(String value) {
            try {
                return check(value);
            } catch (IllegalArgumentException e) {
                throw EngineRefusal.refused(e.getMessage());
            }
        }

        /** Its value in {@code conf} (the application's Spark conf), else the environment's,
         *  else the default; as {@link #refusing}. */
        public String read(org.apache.spark.SparkConf conf) {
            return refusing(conf.get(key, null));
        }
    }

    /** The message {@code message.<name>} with each {@code {field}} of {@code fields}
     *  (field, value, field, value, ...) filled in, as zklock/spark/protocol.py's message. */
    public static String message(String name, String... fields) {
        String text = get("message." + name);
        for (int i = 0; i + 1 < fields.length; i += 2) {
            text = text.replace("{" + fields[i] + "}", fields[i + 1]);
        }
        return text;
    }

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
