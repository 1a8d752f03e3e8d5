// A Spark plugin whose one job is to make a missing zklock jar stop Spark instead of
// leaving every statement unlocked.
//
// Spark only warns when a class named in spark.sql.extensions cannot be loaded ("Cannot use
// zklock.EngineLocks to configure session extensions") and then runs every statement
// without it: a wrong spark.jars path or an image built without the jar would mean no locks
// at all, silently. A class named in spark.plugins is different: Spark refuses to start
// without it (ClassNotFoundException: zklock.EnginePlugin). So docs/deploy.md's
// spark-defaults.conf names this plugin beside the extension:
//   spark.plugins=zklock.EnginePlugin
// With the jar there, the plugin checks, on the driver, once, what the class path and the
// conf must hold for the extension to lock every statement, and stops the application in
// one line naming the fix when they do not: the extension named in spark.sql.extensions,
// and one build of zklock's jar (two of different builds would mix their classes).
// Executors get nothing from it.
package zklock;

import java.io.IOException;
import java.io.InputStream;
import java.net.URL;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;

import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

public final class EnginePlugin implements SparkPlugin {
    /** Spark's setting naming session extensions. */
    static final String EXTENSIONS = "spark.sql.extensions";
    /** What the build writes into zklock's jar: its version and build (jvm.py). */
    static final String MODULE_PROPERTIES = "zklock/module.properties";

    @Override
    public DriverPlugin driverPlugin() {
        return new DriverPlugin() {
            @Override
            public Map<String, String> init(SparkContext sc, PluginContext context) {
                check(sc.getConf().get(EXTENSIONS, ""), builds());
                return Collections.emptyMap();
            }
        };
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return null;
    }

    /** Refuse, in one line, a conf or class path on which the extension would not lock
     *  every statement. */
    static void check(String extensions, List<String> builds) {
        if (!Arrays.asList(extensions.split("\\s*,\\s*")).contains(Protocol.EXTENSION_CLASS)) {
            throw new IllegalStateException("zklock: spark.plugins names " + Protocol.PLUGIN_CLASS
                + " but spark.sql.extensions does not name " + Protocol.EXTENSION_CLASS
                + ", so no statement would be locked: add it (docs/deploy.md)");
        }
        if (new TreeSet<>(builds).size() > 1) {
            throw new IllegalStateException("zklock: zklock jars of different builds are on"
                + " the class path (" + String.join(", ", builds) + "): keep this zklock's"
                + " only (zklock spark jar)");
        }
    }

    /** The build of each zklock jar on the class path, as "version/build at location". */
    private static List<String> builds() {
        List<String> found = new ArrayList<>();
        try {
            Enumeration<URL> all = EnginePlugin.class.getClassLoader()
                .getResources(MODULE_PROPERTIES);
            for (URL url : Collections.list(all)) {
                Properties props = new Properties();
                try (InputStream in = url.openStream()) {
                    props.load(in);
                }
                found.add(props.getProperty("version") + "/" + props.getProperty("build"));
            }
        } catch (IOException e) {
            throw new IllegalStateException("zklock: cannot read the builds of zklock's jars: "
                + e, e);
        }
        return found;
    }
}
