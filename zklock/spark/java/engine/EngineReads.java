// Whether zklock's engine locks the queries of a session, and what a query gets where no lock
// client runs: the Spark conf spark.zklock.engine.reads (docs/configuration.md).
//   lock (the default): every query takes S on what it reads; without a lock client in the
//        process it is refused, in one line, as a write is;
//   warn: as lock, but without a lock client the query runs, and the application's log
//        says once per table set that it read them without locks;
//   off:  queries take no locks in the engine (an application that reads only immutable
//        tables); its writes are still locked.
// Hive's Driver takes S for every query of every client; a read without its locks can see a
// table while another job overwrites it (missing files, or a mix of old and new).
package zklock.engine;

import java.util.Collections;
import java.util.HashSet;
import java.util.Set;

import org.apache.spark.sql.SparkSession;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import zklock.EngineRefusal;
import zklock.Protocol;

final class EngineReads {
    private static final Logger LOG = LoggerFactory.getLogger(EngineReads.class);
    /** What this application has warned about: once per table set. */
    private static final Set<String> WARNED = Collections.synchronizedSet(new HashSet<>());

    private EngineReads() {
    }

    /** lock, warn or off; EngineRefusal for anything else (a typo must not turn locks off). */
    static String mode(SparkSession session) {
        return LockClients.setting(session, Protocol.ENGINE_READS);
    }

    /** Does the engine lock this session's queries? */
    static boolean locked(SparkSession session) {
        return !Protocol.Choice.ENGINE_READS_OFF.equals(mode(session));
    }

    /** A query's rows leave as an RDD outside any SQL execution (df.rdd): the engine cannot
     *  tell when its jobs end, so it takes nothing and says so once per table set. */
    static void unbounded(String what) {
        if (WARNED.add("rdd:" + what)) {
            LOG.warn("zklock: an RDD of a query reads " + what + " WITHOUT LOCKS: its jobs run"
                + " outside a SQL execution, whose end would release them; hold them for the"
                + " RDD's life with LockingSession.holding(df). Said once per table set.");
        }
    }

    /** A query needs S on {@code what} and no lock client runs here: refused (lock), or
     *  allowed with a warning once per table set (warn). */
    static void unlocked(SparkSession session, String what) {
        if (!Protocol.Choice.ENGINE_READS_WARN.equals(mode(session))) {
            throw EngineRefusal.refused("zklock: refused a query of " + what + ": it needs S locks"
                + " and no lock client runs in this process; create a LockingSession or call"
                + " zklock.spark.enforce(spark) first, or set " + Protocol.ENGINE_READS.key + "=warn to run it"
                + " unlocked with a warning");
        }
        if (WARNED.add(what)) {
            LOG.warn("zklock: a query read " + what + " WITHOUT LOCKS: no lock client runs in"
                + " this process (" + Protocol.ENGINE_READS.key + "=warn); a concurrent overwrite can make it fail"
                + " or read a mix of old and new files. Said once per table set.");
        }
    }
}
