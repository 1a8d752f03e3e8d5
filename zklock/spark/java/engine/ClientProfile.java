// What a lock client says of itself when it starts serving the engine (a py4j client when
// installed or bound, the child in its "ready" line), as one versioned JSON document that
// zklock/spark/lock_client.py's client_profile writes:
//   {"version": 1, "space": "<where it locks: Settings.lock_space>",
//    "settings": {"<Spark conf key>": {"value": "...", "over_spark_conf": true|false}, ...}}
// "settings" holds its value of each setting the engine reads from a session's conf
// (config.py's ENGINE_SETTINGS: unknown statements, engine reads, commit isolation), empty
// where the client publishes its own into the session's conf (a LockingSession, whose SET
// may change them); "over_spark_conf" says whether it was set above the Spark conf (an
// enforce() argument, the LockManager's), where the documented precedence puts it before
// the session's conf; else it is the environment's or the default, which the conf beats.
package zklock.engine;

import java.io.IOException;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Field;

final class ClientProfile {
    private static final ObjectMapper JSON = new ObjectMapper();

    final String space;
    /** Its engine settings by Spark conf key: {"value", "over_spark_conf"}. */
    private final JsonNode settings;

    private ClientProfile(JsonNode doc) {
        space = doc.path(Field.SPACE).asText("");
        settings = doc.path(Field.SETTINGS);
    }

    /** The profile in {@code doc}; a refusal naming the format when it is not this one. */
    static ClientProfile read(JsonNode doc) {
        if (doc.path(Field.VERSION).asInt() != Protocol.Version.ENGINE) {
            throw EngineRefusal.refused("zklock: a lock client's profile in format "
                + doc.path(Field.VERSION) + ", where this module reads format "
                + Protocol.Version.ENGINE + ": install the same zklock on both sides");
        }
        return new ClientProfile(doc);
    }

    static ClientProfile read(String text) {
        try {
            return read(JSON.readTree(text));
        } catch (IOException e) {
            throw EngineRefusal.refused("zklock: an unreadable lock client profile: "
                + e.getMessage());
        }
    }

    /** The value of the setting {@code key} given the session's conf value ({@code conf},
     *  null: unset), by docs/configuration.md's precedence: the client's when set above the
     *  Spark conf, else the session's conf, else the client's (environment or default);
     *  null when neither says. */
    String resolve(String key, String conf) {
        JsonNode mine = settings.path(key);
        if (mine.path(Field.VALUE).isTextual()
                && (mine.path(Field.OVER_SPARK_CONF).asBoolean(false) || conf == null)) {
            return mine.path(Field.VALUE).asText();
        }
        return conf;
    }
}
