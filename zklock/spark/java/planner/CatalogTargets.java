// The catalog side of lock planning: which table or database a name in a plan means, which
// partition a static spec locks, and which catalog tables a path touches. Every statement's
// rules (DataWrites.java, DdlWrites.java) and zklock's own statements name objects with it,
// so a name is resolved one way whatever statement carries it.
package zklock.planner;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.analysis.ResolvedNamespace;
import org.apache.spark.sql.catalyst.analysis.ResolvedTempView;
import org.apache.spark.sql.catalyst.analysis.UnresolvedPartitionSpec;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.ExternalCatalog;
import org.apache.spark.sql.catalyst.catalog.SessionCatalog;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.connector.catalog.Identifier;

import scala.collection.Iterator;
import scala.collection.Seq;

import zklock.EngineRefusal;
import zklock.Protocol.Mode;
import zklock.planner.LockAnswer.Target;

public final class CatalogTargets {
    private final SparkSession session;
    private final SessionCatalog catalog;

    public CatalogTargets(SparkSession session) {
        this.session = session;
        this.catalog = session.sessionState().catalog();
    }

    boolean databaseExists(String db) {
        return catalog.databaseExists(db);
    }

    /** The name a statement gives at {@code node}: as parsed, or as Spark resolved it (a
     *  command Spark builds already resolved, and on Spark 3.5 the first form an extension
     *  sees of a command built without SQL); empty when the node names nothing zklock can
     *  read. */
    List<String> ident(LogicalPlan node) {
        Seq<String> parts = PlanWalker.nameParts(node);
        if (parts != null) {
            return PlanWalker.strings(parts);
        }
        if (node instanceof SubqueryAlias) {
            return ident(((SubqueryAlias) node)
                .child());
        }
        if (node.nodeName().startsWith("CurrentNamespace")) {
            List<String> out = new ArrayList<>();
            out.add(catalog.getCurrentDatabase());
            return out;
        }
        if (node instanceof ResolvedNamespace) {
            return PlanWalker.strings(((ResolvedNamespace)
                node).namespace());
        }
        Identifier id = PlanWalker.resolvedName(node);
        if (id != null && id.namespace().length == 0
                && !(node instanceof ResolvedTempView)) {
            return new ArrayList<>();  // a table of a catalog with flat names: no database
        }
        if (id != null) {
            List<String> out = new ArrayList<>(Arrays.asList(id.namespace()));
            out.add(id.name());
            return out;
        }
        TableIdentifier table = PlanWalker.resolvedTable(node);
        return table != null ? parts(table) : new ArrayList<>();
    }

    /** The database a statement names ({@code parts}, from its child); refused when it names
     *  none zklock can read. */
    static String namedDatabase(List<String> parts, LogicalPlan parsed) {
        if (parts.isEmpty()) {
            throw LockAnswer.unsupported("zklock cannot tell which database "
                + PlanWalker.nodeName(parsed) + " names; the statement was not run");
        }
        return last(parts);
    }

    /** The table or view a write names at {@code node}; null for a temporary view. Refused
     *  when the node names nothing zklock can read: that is never "nothing to lock". */
    Target namedTable(LogicalPlan node, String mode) {
        List<String> parts = ident(node);
        if (parts.isEmpty()) {
            throw LockAnswer.unsupported("zklock cannot tell which table "
                + PlanWalker.nodeName(node) + " names; the statement was not run");
        }
        return tableTarget(parts, mode);
    }

    /** The table {@code name} names, as SQL writes it (parsed by Spark's parser, whose
     *  error is thrown unchanged), as {@link #tableTarget(List, String)} makes it. */
    Target tableTarget(String name, String mode) {
        try {
            return tableTarget(PlanWalker.strings(
                session.sessionState().sqlParser().parseMultipartIdentifier(name)), mode);
        } catch (Exception e) {
            throw EngineRefusal.sneaky(e);
        }
    }

    /** A table from its name parts; null for temporary views and non-tables. The catalog part
     *  of a three-part name is dropped: all catalogs share one lock namespace, which can only
     *  add conflicts, never lose one. */
    Target tableTarget(List<String> parts, String mode) {
        if (parts == null || parts.isEmpty()) {
            return null;
        }
        if (parts.size() == 1) {
            if (catalog.getTempView(parts.get(0)).isDefined()) {
                return null;
            }
            return new Target(catalog.getCurrentDatabase(), parts.get(0), Collections.emptyList(), mode);
        }
        return new Target(parts.get(parts.size() - 2), last(parts), Collections.emptyList(), mode);
    }

    /** The catalog's description of {@code table}; null when there is no such table. */
    CatalogTable metadataOrNull(Target table) {
        try {
            return catalog.getTableMetadata(new TableIdentifier(
                table.table, scala.Option.apply(table.db)));
        } catch (Exception e) {
            return null;
        }
    }

    /** X on the table a write names at {@code node} (nothing for a temporary view). */
    List<Target> onTable(LogicalPlan node, String mode) {
        if (PlanWalker.nodeName(node).equals("PlanWithUnresolvedIdentifier")) {
            throw LockAnswer.invalidArguments("zklock cannot tell which table"
                + " IDENTIFIER(<expression>) names before the statement runs; name it literally");
        }
        Target table = namedTable(node, mode);
        return table == null ? new ArrayList<>() : one(table);
    }

    /** The partitions a partition statement names; the whole table when a spec is not one
     *  zklock can read before the statement runs. */
    List<Target> onPartitions(LogicalPlan parsed, List<?> specs, String mode) {
        Target table = namedTable(parsed.children().apply(0), mode);
        if (table == null) {
            return new ArrayList<>();
        }
        List<Target> out = new ArrayList<>();
        for (Object spec : specs) {
            if (!(spec instanceof UnresolvedPartitionSpec)) {
                return one(table);
            }
            out.add(staticPrefix(table, mapping(((UnresolvedPartitionSpec) spec).spec())));
        }
        return out;
    }

    /** The table of {@code parsed}'s first child, or the partition its optional spec names. */
    List<Target> onSpec(LogicalPlan parsed,
                        scala.Option<scala.collection.immutable.Map<String, String>> spec,
                        String mode) {
        Target table = namedTable(parsed.children().apply(0), mode);
        if (table == null) {
            return new ArrayList<>();
        }
        return one(staticPrefix(table, spec.isDefined() ? mapping(spec.get()) : new HashMap<>()));
    }

    /** The table, or its partition given by the leading static values of {@code spec}
     *  (columns after the first dynamic or missing one are ignored: the conservative rule
     *  Hive's design gives for dynamic partitions). */
    Target staticPrefix(Target table, Map<String, String> spec) {
        if (spec.isEmpty()) {
            return table;
        }
        CatalogTable meta = metadataOrNull(table);
        if (meta == null) {  // no such table (CREATE, or Spark will raise its own error)
            return table;
        }
        return prefix(table, PartitionPins.partitionColumns(meta), spec);
    }

    /** {@code table}'s partition of the leading values of {@code spec} over {@code columns}
     *  (name, type), each normalised as the partition's directory names it. */
    static Target prefix(Target table, List<String[]> columns, Map<String, String> spec) {
        Map<String, String> values = new HashMap<>();
        for (Map.Entry<String, String> e : spec.entrySet()) {
            values.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue());
        }
        List<String[]> prefix = new ArrayList<>();
        for (String[] c : columns) {
            String value = values.get(c[0].toLowerCase(Locale.ROOT));
            String normal = value == null ? null : PartitionPins.normalizeValue(value, c[1]);
            if (normal == null) {
                break;
            }
            prefix.add(new String[] {c[0], normal});
        }
        return new Target(table.db, table.table, prefix, table.mode);
    }

    /** X on every catalog table whose directory {@code path} is, lies in, or contains: a
     *  write there writes those tables (overwriting a parent directory replaces them, and a
     *  file written inside a table's directory is a write to that table). */
    public List<Target> tablesAt(String path) {
        String target = rstripSlash(qualify(path));
        List<Target> out = new ArrayList<>();
        ExternalCatalog external = catalog.externalCatalog();
        for (String db : PlanWalker.strings(external.listDatabases())) {
            if (external.listTables(db).isEmpty()) {
                continue;
            }
            // listed again, not kept: its Seq is Scala 2.12's or 2.13's, as Spark's (Java 8
            // has no `var` to hold either)
            Seq<CatalogTable> tables =
                external.getTablesByName(db, external.listTables(db));
            for (int i = 0; i < tables.size(); i++) {
                CatalogTable t = tables.apply(i);
                if (!t.storage().locationUri().isDefined()) {
                    continue;
                }
                String location = rstripSlash(qualify(t.storage().locationUri().get().toString()));
                if (target.equals(location) || target.startsWith(location + "/")
                        || location.startsWith(target + "/")) {
                    out.add(new Target(db, t.identifier().table(), Collections.emptyList(),
                        Mode.EXCLUSIVE));
                }
            }
        }
        return out;
    }

    private String qualify(String path) {
        Path target = new Path(path);
        try {
            return target.getFileSystem(session.sparkContext().hadoopConfiguration())
                .makeQualified(target).toString();
        } catch (IOException e) {
            throw LockAnswer.invalidArguments("zklock cannot resolve the path " + path + ": "
                + e);
        }
    }

    private static String rstripSlash(String s) {
        int end = s.length();
        while (end > 0 && s.charAt(end - 1) == '/') {
            end--;
        }
        return s.substring(0, end);
    }

    static String last(List<String> parts) {
        return parts.get(parts.size() - 1);
    }

    static List<String> parts(TableIdentifier id) {
        List<String> out = new ArrayList<>();
        if (id.database().isDefined()) {
            out.add(id.database().get());
        }
        out.add(id.table());
        return out;
    }

    static List<Target> one(Target target) {
        List<Target> out = new ArrayList<>();
        out.add(target);
        return out;
    }

    static Map<String, String> mapping(scala.collection.Map<String, String> map) {
        Map<String, String> out = new LinkedHashMap<>();
        Iterator<scala.Tuple2<String, String>> it = map.iterator();
        while (it.hasNext()) {
            scala.Tuple2<String, String> kv = it.next();
            out.put(kv._1(), String.valueOf(kv._2()));
        }
        return out;
    }
}
