// One of zklock's settings that the JVM module reads itself: a row of zklock/config.py's
// settings table, as the build wrote it into the generated Protocol (its Spark conf key,
// environment variable, default and choices). Its value is read as Python reads it: the
// Spark conf's, else the environment's, else the default; a value outside its choices is
// refused, naming the key (a typo must not turn locks off).
package zklock;

import java.util.Arrays;
import java.util.List;
import java.util.Locale;

import org.apache.spark.SparkConf;

public final class Setting {
    public final String name;
    /** Its Spark conf key. */
    public final String key;
    private final String env;
    private final String fallback;
    private final List<String> choices;
    /** A boolean setting: {@link #check} answers "true" or "false". */
    private final boolean flag;

    /** The setting {@code name} (Spark conf {@code key}, environment variable {@code env},
     *  default {@code fallback}, "" for none); {@code choices} null where any value goes. */
    public Setting(String name, String key, String env, String fallback, List<String> choices,
                   boolean flag) {
        this.name = name;
        this.key = key;
        this.env = env;
        this.fallback = fallback.isEmpty() ? null : fallback;
        this.choices = choices;
        this.flag = flag;
    }

    /** {@code value} (null: unset) as the setting's: else the environment's, else the
     *  default (null when it has none); one of its choices, lower-case, where it has them:
     *  IllegalArgumentException naming the key for anything else. */
    public String check(String value) {
        String v = value != null ? value : System.getenv(env);
        if (v == null || v.trim().isEmpty()) {
            return fallback;
        }
        String word = v.trim().toLowerCase(Locale.ROOT);
        List<String> allowed = choices;
        if (flag) {
            if (Protocol.TRUE_WORDS.contains(word)) {
                return "true";
            }
            if (Protocol.FALSE_WORDS.contains(word)) {
                return "false";
            }
            allowed = Arrays.asList("true", "false");
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

    /** {@link #check} of a whole-number setting (milliseconds): IllegalArgumentException
     *  naming the key for anything else. */
    public long number(String value) {
        String v = check(value);
        try {
            long n = Long.parseLong(v);
            if (n >= 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // said below
        }
        throw new IllegalArgumentException("zklock: " + key + " is a whole number, not '" + v
            + "'");
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
    public String read(SparkConf conf) {
        return refusing(conf.get(key, null));
    }
}
