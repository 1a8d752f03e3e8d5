// The lock rules of DDL: CREATE, DROP, ALTER and RENAME of databases, tables, views and
// partitions, LOAD DATA, ANALYZE and table repair. Hive's lock table: X on the object changed
// (S for the statements Hive gives S, such as ALTER ... SET SERDEPROPERTIES), X on the
// tables whose directory a new location touches, and S only for a CREATE ... IF NOT EXISTS
// of an object that exists.
package zklock.planner;

import java.net.URI;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.spark.sql.catalyst.plans.logical.AddPartitions;
import org.apache.spark.sql.catalyst.plans.logical.AnalyzeColumn;
import org.apache.spark.sql.catalyst.plans.logical.AnalyzeTable;
import org.apache.spark.sql.catalyst.plans.logical.AnalyzeTables;
import org.apache.spark.sql.catalyst.plans.logical.CreateNamespace;
import org.apache.spark.sql.catalyst.plans.logical.CreateTable;
import org.apache.spark.sql.catalyst.plans.logical.CreateTableAsSelect;
import org.apache.spark.sql.catalyst.plans.logical.CreateView;
import org.apache.spark.sql.catalyst.plans.logical.DropPartitions;
import org.apache.spark.sql.catalyst.plans.logical.LoadData;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.RenamePartitions;
import org.apache.spark.sql.catalyst.plans.logical.RenameTable;
import org.apache.spark.sql.catalyst.plans.logical.ReplaceTable;
import org.apache.spark.sql.catalyst.plans.logical.ReplaceTableAsSelect;
import org.apache.spark.sql.catalyst.plans.logical.SetTableLocation;
import org.apache.spark.sql.catalyst.plans.logical.SetTableSerDeProperties;
import org.apache.spark.sql.catalyst.plans.logical.TruncatePartition;
import org.apache.spark.sql.execution.command.CreateTableLikeCommand;
import org.apache.spark.sql.execution.command.RepairTableCommand;

import scala.collection.Iterator;
import scala.collection.Seq;

import zklock.Protocol.Mode;
import zklock.planner.LockAnswer.Target;
import zklock.planner.NodeKinds.Kind;

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
        return onPartitions(parsed).orElseGet(() -> onTables(name, kind, parsed));
    }

    /** What a command on a table's partitions (or on one, where its spec names it) locks:
     *  X on each partition, or S where Hive's lock table says so; empty for another. */
    private Optional<List<Target>> onPartitions(LogicalPlan parsed) {
        if (parsed instanceof AddPartitions) {
            return Optional.of(names.onPartitions(parsed, list(((AddPartitions) parsed).parts()),
                Mode.EXCLUSIVE));
        }
        if (parsed instanceof DropPartitions) {
            return Optional.of(names.onPartitions(parsed,
                list(((DropPartitions) parsed).parts()), Mode.EXCLUSIVE));
        }
        if (parsed instanceof RenamePartitions) {
            RenamePartitions rp = (RenamePartitions) parsed;
            return Optional.of(names.onPartitions(parsed, Arrays.asList(rp.from(), rp.to()),
                Mode.EXCLUSIVE));
        }
        if (parsed instanceof TruncatePartition) {
            return Optional.of(names.onPartitions(parsed,
                Arrays.asList(((TruncatePartition) parsed).partitionSpec()), Mode.EXCLUSIVE));
        }
        if (parsed instanceof LoadData) {
            return Optional.of(names.onSpec(parsed, ((LoadData) parsed).partition(),
                Mode.EXCLUSIVE));
        }
        if (parsed instanceof SetTableLocation) {
            return Optional.of(names.onSpec(parsed, ((SetTableLocation) parsed).partitionSpec(),
                Mode.EXCLUSIVE));
        }
        if (parsed instanceof SetTableSerDeProperties) {  // Hive's lock table: S on T1
            return Optional.of(names.onSpec(parsed,
                ((SetTableSerDeProperties) parsed).partitionSpec(), Mode.SHARED));
        }
        return Optional.empty();
    }

    /** What any other DDL statement locks: its tables (or database), or nothing where it
     *  only reads; refused without a rule. */
    private List<Target> onTables(String name, Kind kind, LogicalPlan parsed) {
        if (parsed instanceof RenameTable) {
            return rename((RenameTable) parsed);
        }
        if (parsed instanceof AnalyzeTable || parsed instanceof AnalyzeColumn) {
            return analyze(parsed);
        }
        if (parsed instanceof AnalyzeTables) {
            List<String> parts = names.ident(parsed.children().apply(0));
            return CatalogTargets.one(
                Target.database(CatalogTargets.namedDatabase(parts, parsed), Mode.SHARED));
        }
        if (parsed instanceof CreateTableLikeCommand) {
            return createLike((CreateTableLikeCommand) parsed);
        }
        if (parsed instanceof RepairTableCommand) {
            // ALTER TABLE RECOVER PARTITIONS and Catalog.recoverPartitions as Spark 3.5's first
            // resolution pass leaves them (4.0 on read RecoverPartitions, as parsed)
            Target table = names.tableTarget(CatalogTargets.parts(
                ((RepairTableCommand) parsed).tableName()), Mode.EXCLUSIVE);
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
            (parsed instanceof CreateTable
                && ((CreateTable) parsed)
                    .ignoreIfExists())
            || (parsed instanceof CreateTableAsSelect
                && ((CreateTableAsSelect) parsed)
                    .ignoreIfExists())
            || (parsed instanceof CreateView
                && ((CreateView) parsed)
                    .allowExisting())
            || (parsed instanceof CreateNamespace
                && ((CreateNamespace) parsed)
                    .ifNotExists());
        if (!ifNotExists || parsed.children().isEmpty()) {
            return false;
        }
        List<String> parts = names.ident(parsed.children().apply(0));
        if (parts.isEmpty()) {
            return false;
        }
        if (parsed instanceof CreateNamespace) {
            return names.databaseExists(CatalogTargets.last(parts));
        }
        Target table = names.tableTarget(parts, Mode.EXCLUSIVE);
        return table != null && names.metadataOrNull(table) != null;
    }

    /** X on catalog tables whose files a statement's location touches: a table created or
     *  moved onto another's directory, or files LOAD DATA moves out of one. */
    List<Target> locationWrites(LogicalPlan parsed) {
        String location = null;
        if (parsed instanceof CreateTable) {
            location = option(((CreateTable) parsed)
                .tableSpec().location());
        } else if (parsed instanceof
                CreateTableAsSelect) {
            location = option(
                ((CreateTableAsSelect) parsed)
                .tableSpec().location());
        } else if (parsed instanceof ReplaceTable) {
            location = option(((ReplaceTable) parsed)
                .tableSpec().location());
        } else if (parsed instanceof
                ReplaceTableAsSelect) {
            location = option(
                ((ReplaceTableAsSelect) parsed)
                .tableSpec().location());
        } else if (parsed instanceof
                SetTableLocation) {
            location = ((SetTableLocation) parsed)
                .location();
        } else if (parsed instanceof LoadData
                && !((LoadData) parsed).isLocal()) {
            location = ((LoadData) parsed).path();
        }
        return location == null ? new ArrayList<>() : names.tablesAt(location);
    }

    /** X on the renamed table and on its new name (within the old database when the new
     *  name has none, as Spark renames). */
    private List<Target> rename(RenameTable parsed) {
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
        if (parsed instanceof AnalyzeTable) {
            Iterator<scala.Tuple2<String, scala.Option<String>>> it =
                ((AnalyzeTable) parsed)
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
            CreateTableLikeCommand like) {
        Target table = names.tableTarget(CatalogTargets.parts(like.targetTable()), Mode.EXCLUSIVE);
        List<Target> out = table == null ? new ArrayList<>() : CatalogTargets.one(table);
        scala.Option<URI> location = like.fileFormat().locationUri();
        if (location.isDefined()) {
            out.addAll(names.tablesAt(location.get().toString()));
        }
        return out;
    }

    private static List<Object> list(Seq<?> seq) {
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
