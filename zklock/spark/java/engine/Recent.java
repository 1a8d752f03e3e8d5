// A map of the newest entries only: what the engine remembers of ids it looks up rarely and
// must not keep for ever on a long-running server (sessions whose end was heard, Spark Connect
// blocks released without their client).
package zklock.engine;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

final class Recent {
    private Recent() {
    }

    /** A synchronized map that keeps its newest {@code size} entries. */
    static <V> Map<String, V> map(int size) {
        return Collections.synchronizedMap(new LinkedHashMap<String, V>() {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<String, V> eldest) {
                return size() > size;
            }
        });
    }
}
