// How a statement waits for its locks, as its own session set it: the carried keys
// (config.py's carried settings; Protocol.CARRIED_KEYS) whose value in the session's conf is
// not the application's Spark conf's. Spark copies every Spark conf entry into each session's
// conf, and the lock client counted those already, at that level: sent again, a server's
// lock.retries would sit beside a client's SET of lock.timeout at the same level, and a tie
// goes to the count. The lock client counts what this sends at the Spark conf's level
// (Settings.for_statement).
package zklock.engine;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.WeakHashMap;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;

import zklock.Protocol;

final class CarriedConf {
    /** The application's Spark conf values of the carried keys, by SparkContext: its Spark
     *  conf does not change once it runs, and getConf copies all of it. */
    private static final Map<SparkContext, Map<String, String>> APPLICATION =
        Collections.synchronizedMap(new WeakHashMap<>());

    private CarriedConf() {
    }

    /** The carried keys {@code session}'s conf sets to other values than the application's
     *  Spark conf does, with their values. */
    static Map<String, String> of(SparkSession session) {
        Map<String, String> application = APPLICATION.computeIfAbsent(
            session.sparkContext(), CarriedConf::application);
        Map<String, String> conf = new LinkedHashMap<>();
        for (String key : Protocol.CARRIED_KEYS) {
            String value = session.conf().get(key, null);
            if (value != null && !value.equals(application.get(key))) {
                conf.put(key, value);
            }
        }
        return conf;
    }

    private static Map<String, String> application(SparkContext sc) {
        SparkConf spark = sc.getConf();
        Map<String, String> values = new LinkedHashMap<>();
        for (String key : Protocol.CARRIED_KEYS) {
            if (spark.contains(key)) {
                values.put(key, spark.get(key));
            }
        }
        return values;
    }
}
