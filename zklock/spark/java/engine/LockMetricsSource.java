// zklock's figures in Spark's own metrics system: a metrics Source of the driver, named
// "zklock", so that every sink a platform already scrapes serves them with Spark's
// application labels: PrometheusServlet on the UI port, JMX, Graphite, StatsD, CSV.
// zklock's Python serves its own Prometheus endpoint where asked (metrics_port); this one
// needs no port of its own and covers every client of the engine (a Thrift server's JDBC
// users, spark-sql, Spark Connect), whatever runs their lock client.
//
// Counted from the grant each statement's guard already holds (LockFigures.java): nothing
// is added to a statement's path but a few counter increments.
package zklock.engine;

import java.util.concurrent.TimeUnit;

import com.codahale.metrics.Counter;
import com.codahale.metrics.MetricRegistry;
import com.codahale.metrics.Timer;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.metrics.source.Source;

import scala.collection.Iterator;

final class LockMetricsSource implements Source {
    static final String NAME = "zklock";

    private static LockMetricsSource current;

    private final SparkContext sc;
    private final MetricRegistry registry = new MetricRegistry();
    private final Counter statements = registry.counter("statementsLocked");
    private final Timer waits = registry.timer("lockWait");
    private final Counter attempts = registry.counter("lockAttempts");
    private final Counter denials = registry.counter("lockDenials");
    private final Timer holds = registry.timer("lockHeld");
    private final Counter lost = registry.counter("lockSetsLost");
    private final Timer ends = registry.timer("statementEnd");
    private final Counter releasedAfter = registry.counter("releasesAfterReturn");
    private final Timer listing = registry.timer("fileListing");
    private final Counter listed = registry.counter("fileIndexesListed");
    private final Counter kept = registry.counter("fileIndexesKept");

    private LockMetricsSource(SparkContext sc) {
        this.sc = sc;
    }

    /** The source of {@code sc}'s application, registered with its metrics system on first
     *  use (a new SparkContext in the same JVM gets a new one). */
    static synchronized LockMetricsSource of(SparkContext sc) {
        if (current == null || current.sc != sc) {
            current = new LockMetricsSource(sc);
            SparkEnv env = SparkEnv.get();
            if (env != null) {
                env.metricsSystem().registerSource(current);
            }
        }
        return current;
    }

    /** The counts of the zklock source registered in this JVM's metrics system, read from
     *  there (as a sink reads them): {"statementsLocked": n, "lockWait": n, "lockWaitMeanMs":
     *  x, "lockWaitMedianMs": x, ...} (a timer's count, mean and median); {} when none is
     *  registered. */
    static String registered() {
        SparkEnv env = SparkEnv.get();
        ObjectNode counts =
            new ObjectMapper().createObjectNode();
        if (env == null) {
            return counts.toString();
        }
        Iterator<Source> sources =
            env.metricsSystem().getSourcesByName(NAME).iterator();
        while (sources.hasNext()) {
            MetricRegistry found = sources.next().metricRegistry();
            found.getCounters().forEach((name, c) -> counts.put(name, c.getCount()));
            found.getTimers().forEach((name, t) -> {
                counts.put(name, t.getCount());
                counts.put(name + "MeanMs", t.getSnapshot().getMean() / 1e6);
                counts.put(name + "MedianMs", t.getSnapshot().getMedian() / 1e6);
            });
        }
        return counts.toString();
    }

    @Override
    public String sourceName() {
        return NAME;
    }

    @Override
    public MetricRegistry metricRegistry() {
        return registry;
    }

    /** A statement was granted its locks after {@code guard}'s wait and attempts. */
    void granted(EngineGuard guard) {
        statements.inc();
        waits.update(guard.figures().waitMillis(), TimeUnit.MILLISECONDS);
        attempts.inc(guard.figures().attempts());
        denials.inc(Math.max(0, guard.figures().attempts() - 1));
    }

    /** The file indexes a locked statement reads were listed again (the statement's
     *  listing timed) or kept (FreshListings.java). */
    void listings(FreshListings.Listings done) {
        if (done.listed > 0) {
            listing.update(done.nanos, TimeUnit.NANOSECONDS);
        }
        listed.inc(done.listed);
        kept.inc(done.kept);
    }

    /** It released them (lost or not). */
    void released(EngineGuard guard) {
        holds.update(guard.figures().heldMillis(), TimeUnit.MILLISECONDS);
        if (guard.figures().endNanos() > 0) {  // a command's end (a query's release: at its end)
            ends.update(guard.figures().endNanos(), TimeUnit.NANOSECONDS);
            releasedAfter.inc(guard.figures().releasedAfter() ? 1 : 0);
        }
        if (guard.figures().wasLost()) {
            lost.inc();
        }
    }
}
