// The JSON documents the engine exchanges with its lock client and its planner, read with
// their format checked: an answer in a format this module does not read is refused, never
// guessed at (the two ends are built from one protocol.properties, but a jar of another
// version may meet a newer Python).
package zklock.engine;

import java.io.IOException;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Field;

final class Documents {
    static final ObjectMapper JSON = new ObjectMapper();

    private Documents() {
    }

    /** An answer of the lock client (format Protocol.Version.ENGINE); EngineRefusal when
     *  unreadable or in another format. */
    static JsonNode lockAnswer(String text) {
        return read(text, Protocol.Version.ENGINE);
    }

    /** A document in format {@code version}; EngineRefusal when unreadable or in another. */
    static JsonNode read(String text, int version) {
        try {
            JsonNode doc = JSON.readTree(text);
            if (doc.path(Field.VERSION).asInt() != version) {
                throw EngineRefusal.refused("zklock: an answer in format "
                    + doc.path(Field.VERSION) + ", where this module reads format " + version);
            }
            return doc;
        } catch (IOException e) {
            throw EngineRefusal.refused("zklock: unreadable answer of the lock client: "
                + e.getMessage());
        }
    }

    /** A request for the lock client, as text. */
    static String write(Object doc) {
        try {
            return JSON.writeValueAsString(doc);
        } catch (IOException e) {
            throw EngineRefusal.refused("zklock: could not write a lock request: "
                + e.getMessage());
        }
    }
}
