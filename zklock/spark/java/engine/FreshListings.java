// The file listings of what a statement reads, taken again once its locks are granted, unless
// ZooKeeper proves that no one locked the table since this application last listed it.
//
// Spark lists a file-based table's files once and keeps the listing for the session: in the
// relation it caches for the table (a table without partitions) and in the session's
// FileStatusCache (the partitions of a table the metastore tracks). Another application's
// write, under its own X lock, replaces or adds files and tells this session nothing; the
// next read here, under its S lock, then opens deleted files (FileNotFoundException) or
// misses new ones (a wrong answer, silently). Hive lists the files of each query when it
// runs, after its locks; zklock does the same for the relations of each locked statement.
//
// Listing again costs a file system round trip or more per relation (about 1.5 ms for a small
// local table, far more on an object store). zklock skips it where the locks themselves prove
// it useless: the grant names the tables where its node was the only child, with the table
// node's czxid and cversion (zklock/locks/lockset.py, SoleVersion). Every lock on a table or
// one of its partitions, Hive's included, is a child of the table's node, and the cversion
// counts every child made or deleted. So when this statement's grant finds the table's node
// with the czxid and the cversion plus 2 of the grant under which this same file index was
// last listed or kept (that grant's node deleted, this one's made), no one locked the table
// in between, and no locked write can have changed its files: the listing is kept. Anything
// else (another lock seen, another index object, a table node made again) lists again.
//
// One more thing lists again: a write by this JVM to the table, under any lock space. Locks in
// another root or chroot never touch this one's nodes, yet the same application may write a
// table in one and read it in the other (a LockingSession with a root of its own beside the
// process's client). Each write's end counts against its table (WRITES), and a listing is kept
// only when no write of this JVM ended since it was taken.
package zklock.engine;

import java.lang.ref.WeakReference;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;

import scala.collection.Iterator;

public final class FreshListings {
    /** The last grant under which each table's file index was listed or kept, by the
     *  table's node (Version.node): one entry per table this JVM read, the index held
     *  weakly. */
    private static final Map<String, Listed> LISTED = new ConcurrentHashMap<>();
    /** Writes of this JVM that ended, by table and by database ({@link #key}, or the
     *  database's name), and all of them (""): a listing taken before one is never kept. */
    private static final Map<String, AtomicLong> WRITES =
        new ConcurrentHashMap<>();

    /** A table node's czxid and cversion at a grant where the grant's node was alone. */
    static final class Version {
        /** The table's node: the ZooKeeper's connect string (with its chroot) and path. */
        final String node;
        final long czxid;
        final long cversion;

        Version(String node, long czxid, long cversion) {
            this.node = node;
            this.czxid = czxid;
            this.cversion = cversion;
        }

        /** Is {@code later} the next grant on the table, with no other lock between? */
        boolean followedBy(Version later) {
            return later.czxid == czxid && later.cversion == cversion + 2;
        }
    }

    /** A file index, the version of its table at the grant it was listed or kept under,
     *  and the count of this JVM's writes when that listing began. */
    private static final class Listed {
        final WeakReference<FileIndex> index;
        final Version version;
        final long writes;

        Listed(FileIndex index, Version version, long writes) {
            this.index = new WeakReference<>(index);
            this.version = version;
            this.writes = writes;
        }
    }

    /** A write of this JVM to {@code db}.{@code table} ended (null table: the database, or
     *  null db too: something unnamed): no listing of it taken before is kept. */
    static void written(String db, String table) {
        String key = db == null ? "" : table == null ? db.toLowerCase(Locale.ROOT) : key(db, table);
        WRITES.computeIfAbsent(key, k -> new AtomicLong())
            .incrementAndGet();
    }

    /** The writes so far that touch {@code key}'s table (its own, its database's, any). */
    private static long writes(String key) {
        String db = key.substring(0, key.indexOf('\u0000'));
        long n = 0;
        for (String k : new String[] {key, db, ""}) {
            AtomicLong c = WRITES.get(k);
            n += c == null ? 0 : c.get();
        }
        return n;
    }

    /** What a statement's relations got: how many file indexes were listed again, how
     *  many kept, and the time the listing took. */
    static final class Listings {
        final int listed;
        final int kept;
        final long nanos;

        Listings(int listed, int kept, long nanos) {
            this.listed = listed;
            this.kept = kept;
            this.nanos = nanos;
        }
    }

    /** For py4j, which calls instance methods: {@link #refreshQuery}. */
    public FreshListings() {
    }

    /** List again the files of every relation a query reads, before it runs: those of its
     *  analysed plan (the session's cached relations) and of its optimised plan (the
     *  partitions pruned there), each listing once. Returns how many were listed again. */
    public int refreshQuery(QueryExecution query) {
        return refresh(null, query.analyzed(), query.optimizedPlan()).listed;
    }

    /** The same for logical plans, their children and their subqueries, under {@code guard}'s
     *  grant (null: none of the engine's own, so every index is listed again): a file index
     *  that several of them share (an analysed plan and its optimised one) is listed once,
     *  and one whose table no one locked since it was last listed is kept. */
    static Listings refresh(EngineGuard guard, LogicalPlan... plans) {
        long start = System.nanoTime();
        Map<FileIndex, CatalogTable> indexes = new IdentityHashMap<>();
        for (LogicalPlan plan : plans) {
            collect(plan, indexes);
        }
        int listed = 0;
        for (Map.Entry<FileIndex, CatalogTable> e : indexes.entrySet()) {
            FileIndex index = e.getKey();
            String key = key(e.getValue());
            Version now = guard == null || key == null ? null : guard.sole(key);
            long writes = key == null ? 0 : writes(key);  // before the listing, never after
            Listed last = now == null ? null : LISTED.get(now.node);
            boolean kept = last != null && last.index.get() == index
                && last.version.followedBy(now) && last.writes == writes;
            if (!kept) {
                index.refresh();
                listed++;
            }
            if (now != null) {
                LISTED.put(now.node, new Listed(index, now, writes));
            }
        }
        return new Listings(listed, indexes.size() - listed, System.nanoTime() - start);
    }

    /** The sole versions a grant from the ZooKeeper at {@code zookeeper} names, by table
     *  ({@link #key}) (lock_client.py: [db, table, node path, czxid, cversion] each). An
     *  entry left over from a grant that was not alone never needs removing: whatever
     *  locked the table since moved its cversion past it. */
    static Map<String, Version> versions(JsonNode sole, String zookeeper) {
        if (!sole.isArray() || sole.size() == 0) {
            return Collections.emptyMap();
        }
        Map<String, Version> out = new HashMap<>();
        for (JsonNode t : sole) {
            out.put(key(t.path(0).asText(), t.path(1).asText()), new Version(
                zookeeper + "\u0000" + t.path(2).asText(), t.path(3).asLong(),
                t.path(4).asLong()));
        }
        return out;
    }

    /** A catalog table as the lock client names it (lower case, as zklock's lock objects
     *  are); null for a relation of no catalog table or without its database. */
    private static String key(CatalogTable table) {
        if (table == null || !table.identifier().database().isDefined()) {
            return null;
        }
        return key(table.identifier().database().get(), table.identifier().table());
    }

    private static String key(String db, String table) {
        return db.toLowerCase(Locale.ROOT) + "\u0000" + table.toLowerCase(Locale.ROOT);
    }

    private static void collect(LogicalPlan plan, Map<FileIndex, CatalogTable> indexes) {
        if (plan instanceof LogicalRelation
                && ((LogicalRelation) plan).relation() instanceof HadoopFsRelation) {
            LogicalRelation relation = (LogicalRelation) plan;
            indexes.putIfAbsent(((HadoopFsRelation) relation.relation()).location(),
                relation.catalogTable().isDefined() ? relation.catalogTable().get() : null);
        }
        Iterator<LogicalPlan> children = plan.children().iterator();
        while (children.hasNext()) {
            collect(children.next(), indexes);
        }
        Iterator<LogicalPlan> subqueries = plan.subqueries().iterator();
        while (subqueries.hasNext()) {
            collect(subqueries.next(), indexes);
        }
    }
}
