// A Spark plugin: a missing zklock jar stops Spark instead of leaving every statement
// unlocked, and the application's file writes stage per job (StagedCommitProtocol).
//
// Spark only warns when a class named in spark.sql.extensions cannot be loaded ("Cannot use
// zklock.EngineLocks to configure session extensions") and then runs every statement
// without it: a wrong spark.jars path or an image built without the jar would mean no locks
// at all, silently. A class named in spark.plugins is different: Spark refuses to start
// without it (ClassNotFoundException: zklock.EnginePlugin). So docs/deploy.md's
// spark-defaults.conf names this plugin beside the extension, in the administrators' list
// that Spark puts before an application's own spark.plugins (so no --conf drops it):
//   spark.plugins.defaultList=zklock.EnginePlugin
// With the jar there, the plugin checks, on the driver, once, what the class path and the
// conf must hold for the extension to lock every statement, and stops the application in
// one line naming the fix when they do not: the extension named in spark.sql.extensions, a
// jar built for the running Spark's line (one of another line would fail to link, and Spark
// would only warn), and one build of zklock's jar (two would mix their classes). Then it
// makes zklock's commit protocol the application's default, unless it names another: an
// application-wide setting belongs to the application's start, not to a session extension.
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

import zklock.adapters.PipelineStarts;

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
                check(sc.getConf().get(EXTENSIONS, ""), sc.version(), modules());
                // the application's file writes stage per job, before any session exists
                StagedCommitProtocol.becomeDefault(sc);
                // and a declarative pipeline's run takes its locks as it starts (4.1+)
                try {
                    PipelineStarts.register(sc);
                } catch (NoClassDefFoundError e) {  // a Spark without its Connect server:
                    // no pipeline runs in it, and no interceptor is to register
                }
                return Collections.emptyMap();
            }
        };
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return null;
    }

    /** Refuse, in one line, a conf or class path on which the extension would not lock
     *  every statement of Spark {@code version}; {@code modules}: what each zklock jar on
     *  the class path says of itself (jvm.py writes it). */
    public static void check(String extensions, String version, List<Properties> modules) {
        List<String> named = new ArrayList<>();
        for (String extension : extensions.split(",")) {
            named.add(extension.trim());
        }
        if (!named.contains(Protocol.JvmClass.EXTENSION)) {
            throw new IllegalStateException("zklock: " + Protocol.JvmClass.PLUGIN + " runs, but"
                + " spark.sql.extensions does not name " + Protocol.JvmClass.EXTENSION
                + ", so no statement would be locked: add it (docs/deploy.md)");
        }
        TreeSet<String> builds = new TreeSet<>();
        for (Properties module : modules) {
            builds.add(module.getProperty("version") + "/" + module.getProperty("build"));
        }
        if (builds.size() > 1) {
            throw new IllegalStateException("zklock: zklock jars of different builds are on"
                + " the class path (" + String.join(", ", builds) + "): keep this zklock's"
                + " only (zklock spark jar)");
        }
        String[] parts = version.split("\\.");
        String line = parts[0] + "." + (parts.length > 1 ? parts[1] : "0");
        for (Properties module : modules) {
            List<String> serves = Arrays.asList(module.getProperty("serves", "").split(","));
            if (!serves.contains(line)) {
                throw new IllegalStateException("zklock: zklock's jar is built for Spark "
                    + module.getProperty("spark") + " (lines " + String.join(", ", serves)
                    + "), not for this Spark " + version + ": replace it with the jar for"
                    + " this one (zklock spark jar --spark-version " + version + ")");
            }
        }
    }

    /** What each zklock jar on the application's class path says of itself. */
    private static List<Properties> modules() {
        List<Properties> found = new ArrayList<>();
        ClassLoader loader = Thread.currentThread().getContextClassLoader();
        try {
            Enumeration<URL> all = (loader != null ? loader : EnginePlugin.class.getClassLoader())
                .getResources(MODULE_PROPERTIES);
            for (URL url : Collections.list(all)) {
                Properties props = new Properties();
                try (InputStream in = url.openStream()) {
                    props.load(in);
                }
                found.add(props);
            }
        } catch (IOException e) {
            throw new IllegalStateException("zklock: cannot read what zklock's jars are: " + e, e);
        }
        return found;
    }
}
