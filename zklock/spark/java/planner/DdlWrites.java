// The lock rules of DDL: CREATE, DROP, ALTER and RENAME of databases, tables, views and
// partitions, LOAD DATA, ANALYZE and table repair. Hive's lock table: X on the object changed
// (S for the statements Hive gives S, such as ALTER ... SET SERDEPROPERTIES), X on the
// tables whose directory a new location touches, and S only for a CREATE ... IF NOT EXISTS
// of an object that exists.
package zklock.planner;

import java.util.Arrays;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

import zklock.planner.LockAnswer.Target;
import zklock.planner.NodeKinds.Kind;

import zklock.Protocol.Mode;


final class DdlWrites {
    private final CatalogTargets names;

    DdlWrites(CatalogTargets names) {
        this.names = names;
    }

    /** What the parsed DDL statement {@code parsed} ({@code name}) locks. */
    List<Target> of(String name, LogicalPlan parsed) {
        Kind kind = NodeKinds.kindOf(name);
        if (kind == Kind.DATABASE_X) {
            List<String> parts = names.ident(parsed.children().apply(0));
            return CatalogTargets.one(Target.database(CatalogTargets.namedDatabase(parts, parsed),
                existingCreate(parsed) ? Mode.SHARED : Mode.EXCLUSIVE));
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.RenameTable) {
            return rename((org.apache.spark.sql.catalyst.plans.logical.RenameTable) parsed);
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.AddPartitions) {
            return names.onPartitions(parsed, list(
                ((org.apache.spark.sql.catalyst.plans.logical.AddPartitions) parsed).parts()),
                Mode.EXCLUSIVE);
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.DropPartitions) {
            return names.onPartitions(parsed, list(
                ((org.apache.spark.sql.catalyst.plans.logical.DropPartitions) parsed).parts()),
                Mode.EXCLUSIVE);
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.RenamePartitions) {
            org.apache.spark.sql.catalyst.plans.logical.RenamePartitions rp =
                (org.apache.spark.sql.catalyst.plans.logical.RenamePartitions) parsed;
            return names.onPartitions(parsed, Arrays.asList(rp.from(), rp.to()), Mode.EXCLUSIVE);
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.TruncatePartition) {
            return names.onPartitions(parsed, Arrays.asList(
                ((org.apache.spark.sql.catalyst.plans.logical.TruncatePartition) parsed)
                .partitionSpec()), Mode.EXCLUSIVE);
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.LoadData) {
            return names.onSpec(parsed,
                ((org.apache.spark.sql.catalyst.plans.logical.LoadData) parsed).partition(),
                Mode.EXCLUSIVE);
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.SetTableLocation) {
            return names.onSpec(parsed,
                ((org.apache.spark.sql.catalyst.plans.logical.SetTableLocation) parsed)
                .partitionSpec(), Mode.EXCLUSIVE);
        }
        if (parsed instanceof
                org.apache.spark.sql.catalyst.plans.logical.SetTableSerDeProperties) {
            // Hive's lock table: S on T1
            return names.onSpec(parsed,
                ((org.apache.spark.sql.catalyst.plans.logical.SetTableSerDeProperties) parsed)
                .partitionSpec(), Mode.SHARED);
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.AnalyzeTable
                || parsed instanceof org.apache.spark.sql.catalyst.plans.logical.AnalyzeColumn) {
            return analyze(parsed);
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.AnalyzeTables) {
            List<String> parts = names.ident(parsed.children().apply(0));
            return CatalogTargets.one(
                Target.database(CatalogTargets.namedDatabase(parts, parsed), Mode.SHARED));
        }
        if (parsed instanceof org.apache.spark.sql.execution.command.CreateTableLikeCommand) {
            return createLike(
                (org.apache.spark.sql.execution.command.CreateTableLikeCommand) parsed);
        }
        if (parsed instanceof org.apache.spark.sql.execution.command.RepairTableCommand) {
            // ALTER TABLE RECOVER PARTITIONS and Catalog.recoverPartitions as Spark 3.5's first
            // resolution pass leaves them (4.0 on read RecoverPartitions, as parsed)
            Target table = names.tableTarget(CatalogTargets.parts(((org.apache.spark.sql
                .execution.command.RepairTableCommand) parsed).tableName()), Mode.EXCLUSIVE);
            return table == null ? new ArrayList<>() : CatalogTargets.one(table);
        }
        if (kind == Kind.TABLE_X) {
            return names.onTable(parsed.children().apply(0),
                existingCreate(parsed) ? Mode.SHARED : Mode.EXCLUSIVE);
        }
        if (kind == Kind.READS || kind == Kind.NO_LOCKS) {
            return new ArrayList<>();  // reads only: planned from the analyzed plan
        }
        // LockPlanner routes every other command to refusal or the conservative plan first
        throw LockAnswer.unsupported("zklock has no lock rule for " + name + "; the statement"
            + " was not run");
    }

    /** A CREATE ... IF NOT EXISTS of an object that exists: Spark does nothing, so it needs
     *  S, not X (the usual "make sure it exists" at a job's start must not wait for every
     *  reader and writer). The plan says "recheck": once granted, the statement is planned
     *  again under its locks, and if the object is gone by then it takes X after all. */
    boolean existingCreate(LogicalPlan parsed) {
        boolean ifNotExists =
            (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.CreateTable
                && ((org.apache.spark.sql.catalyst.plans.logical.CreateTable) parsed)
                    .ignoreIfExists())
            || (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.CreateTableAsSelect
                && ((org.apache.spark.sql.catalyst.plans.logical.CreateTableAsSelect) parsed)
                    .ignoreIfExists())
            || (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.CreateView
                && ((org.apache.spark.sql.catalyst.plans.logical.CreateView) parsed)
                    .allowExisting())
            || (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.CreateNamespace
                && ((org.apache.spark.sql.catalyst.plans.logical.CreateNamespace) parsed)
                    .ifNotExists());
        if (!ifNotExists || parsed.children().isEmpty()) {
            return false;
        }
        List<String> parts = names.ident(parsed.children().apply(0));
        if (parts.isEmpty()) {
            return false;
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.CreateNamespace) {
            return names.databaseExists(CatalogTargets.last(parts));
        }
        Target table = names.tableTarget(parts, Mode.EXCLUSIVE);
        return table != null && names.metadataOrNull(table) != null;
    }

    /** X on catalog tables whose files a statement's location touches: a table created or
     *  moved onto another's directory, or files LOAD DATA moves out of one. */
    List<Target> locationWrites(LogicalPlan parsed) {
        String location = null;
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.CreateTable) {
            location = option(((org.apache.spark.sql.catalyst.plans.logical.CreateTable) parsed)
                .tableSpec().location());
        } else if (parsed instanceof
                org.apache.spark.sql.catalyst.plans.logical.CreateTableAsSelect) {
            location = option(
                ((org.apache.spark.sql.catalyst.plans.logical.CreateTableAsSelect) parsed)
                .tableSpec().location());
        } else if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.ReplaceTable) {
            location = option(((org.apache.spark.sql.catalyst.plans.logical.ReplaceTable) parsed)
                .tableSpec().location());
        } else if (parsed instanceof
                org.apache.spark.sql.catalyst.plans.logical.ReplaceTableAsSelect) {
            location = option(
                ((org.apache.spark.sql.catalyst.plans.logical.ReplaceTableAsSelect) parsed)
                .tableSpec().location());
        } else if (parsed instanceof
                org.apache.spark.sql.catalyst.plans.logical.SetTableLocation) {
            location = ((org.apache.spark.sql.catalyst.plans.logical.SetTableLocation) parsed)
                .location();
        } else if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.LoadData
                && !((org.apache.spark.sql.catalyst.plans.logical.LoadData) parsed).isLocal()) {
            location = ((org.apache.spark.sql.catalyst.plans.logical.LoadData) parsed).path();
        }
        return location == null ? new ArrayList<>() : names.tablesAt(location);
    }

    /** X on the renamed table and on its new name (within the old database when the new
     *  name has none, as Spark renames). */
    private List<Target> rename(org.apache.spark.sql.catalyst.plans.logical.RenameTable parsed) {
        Target old = names.namedTable(parsed.children().apply(0), Mode.EXCLUSIVE);
        List<String> newParts = PlanWalker.strings(parsed.newName());
        if (newParts.size() == 1 && old != null) {
            newParts.add(0, old.db);
        }
        List<Target> out = new ArrayList<>();
        for (Target t : new Target[] {old, names.tableTarget(newParts, Mode.EXCLUSIVE)}) {
            if (t != null) {
                out.add(t);
            }
        }
        return out;
    }

    /** S on the table, or on the partition prefix ANALYZE TABLE names. */
    private List<Target> analyze(LogicalPlan parsed) {
        Map<String, String> spec = new LinkedHashMap<>();
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.AnalyzeTable) {
            scala.collection.Iterator<scala.Tuple2<String, scala.Option<String>>> it =
                ((org.apache.spark.sql.catalyst.plans.logical.AnalyzeTable) parsed)
                .partitionSpec().iterator();
            while (it.hasNext()) {
                scala.Tuple2<String, scala.Option<String>> kv = it.next();
                if (kv._2().isDefined()) {
                    spec.put(kv._1(), String.valueOf(kv._2().get()));
                }
            }
        }
        Target table = names.namedTable(parsed.children().apply(0), Mode.SHARED);
        return table == null ? new ArrayList<>()
            : CatalogTargets.one(names.staticPrefix(table, spec));
    }

    /** CREATE TABLE ... LIKE as Spark 4.0 parses it (4.1 parses a CreateTableLike): X on the
     *  new table and on the tables at its location. */
    private List<Target> createLike(
            org.apache.spark.sql.execution.command.CreateTableLikeCommand like) {
        Target table = names.tableTarget(CatalogTargets.parts(like.targetTable()), Mode.EXCLUSIVE);
        List<Target> out = table == null ? new ArrayList<>() : CatalogTargets.one(table);
        scala.Option<java.net.URI> location = like.fileFormat().locationUri();
        if (location.isDefined()) {
            out.addAll(names.tablesAt(location.get().toString()));
        }
        return out;
    }

    private static List<Object> list(scala.collection.Seq<?> seq) {
        List<Object> out = new ArrayList<>();
        for (int i = 0; i < seq.size(); i++) {
            out.add(seq.apply(i));
        }
        return out;
    }

    private static <T> T option(scala.Option<T> value) {
        return value.isDefined() ? value.get() : null;
    }
}
