// How the child lock client (ChildLockClient.java) is started: its command, `python -m
// zklock.spark.lock_process` with the driver's Python, and its first message, the
// application's zklock and Hive settings (those of hive-site.xml too: a Thrift server's
// users configure zklock where they configure Hive), its id, and the lock nodes of the
// children that died before it, for it to delete.
package zklock.engine;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;

import scala.Tuple2;

import zklock.Protocol;
import zklock.Setting;
import zklock.Protocol.Field;

final class ChildLaunch {
    /** The Python that runs the child (unset: the driver's, below). */
    static final Setting PYTHON = Protocol.LOCK_CLIENT_PYTHON;

    private ChildLaunch() {
    }

    /** The child's command line, for {@code conf}'s application. */
    static List<String> argv(SparkConf conf) {
        return Arrays.asList(python(conf), "-m", "zklock.spark.lock_process");
    }

    /** The driver's Python: zklock's setting (its Spark conf key, else ZKLOCK_PYTHON), else
     *  the Python PySpark runs the driver with (spark.pyspark.driver.python,
     *  spark.pyspark.python, PYSPARK_DRIVER_PYTHON, PYSPARK_PYTHON), else python3. */
    static String python(SparkConf conf) {
        String own = PYTHON.read(conf);
        if (own != null) {
            return own;
        }
        for (String key : new String[] {"spark.pyspark.driver.python", "spark.pyspark.python"}) {
            if (conf.contains(key) && !conf.get(key).trim().isEmpty()) {
                return conf.get(key).trim();
            }
        }
        for (String env : new String[] {"PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON"}) {
            String value = System.getenv(env);
            if (value != null && !value.trim().isEmpty()) {
                return value.trim();
            }
        }
        return "python3";
    }

    /** The child's first message: {@code sc}'s settings and id, and {@code abandoned}. */
    static Map<String, Object> hello(SparkContext sc, List<String> abandoned) {
        Map<String, Object> hello = new LinkedHashMap<>();
        hello.put(Field.VERSION, Protocol.Version.ENGINE);
        Map<String, String> conf = new LinkedHashMap<>();
        for (Tuple2<String, String> kv : sc.getConf().getAll()) {
            if (kv._1().startsWith("spark.zklock.") || kv._1().startsWith("spark.hadoop.hive.")
                    || kv._1().startsWith("hive.")) {
                conf.put(kv._1(), kv._2());
            }
        }
        hello.put(Field.CONF, conf);
        Map<String, String> hadoop = new LinkedHashMap<>();  // hive-site.xml's, among others
        for (Map.Entry<String, String> kv : sc.hadoopConfiguration()) {
            if (kv.getKey().startsWith("hive.")) {
                hadoop.put(kv.getKey(), kv.getValue());
            }
        }
        hello.put(Field.HADOOP, hadoop);
        hello.put(Field.APPLICATION, sc.applicationId());
        hello.put(Field.ABANDONED, abandoned);
        return hello;
    }
}
