// The lock rules of statements that write a table's rows: INSERT (into a table, a partition,
// a directory, or a path through a temporary view), DELETE, UPDATE, MERGE, Spark's V2 writes,
// and the commands a DataFrameWriter runs (save, saveAsTable). Hive's lock table: X on the
// table or on the static partition prefix written, S on what the query reads (planned from
// the analyzed plan by PlanWalker.java).
package zklock.planner;

import java.net.URI;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.plans.logical.DeleteFromTable;
import org.apache.spark.sql.catalyst.plans.logical.InsertIntoDir;
import org.apache.spark.sql.catalyst.plans.logical.InsertIntoStatement;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable;
import org.apache.spark.sql.catalyst.plans.logical.UpdateTable;
import org.apache.spark.sql.catalyst.plans.logical.V2WriteCommand;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.execution.datasources.CreateTable;
import org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand;
import org.apache.spark.sql.execution.datasources.SaveIntoDataSourceCommand;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;

import scala.collection.Iterator;
import scala.collection.Seq;

import zklock.Protocol.Mode;
import zklock.adapters.SaveAsTable;
import zklock.planner.LockAnswer.Target;

final class DataWrites {
    private final CatalogTargets names;
    private final PlanWalker walker;

    DataWrites(CatalogTargets names, PlanWalker walker) {
        this.names = names;
        this.walker = walker;
    }

    /** What the parsed statement {@code parsed} writes, when it is a write of rows; empty
     *  when it is a statement of another kind. */
    Optional<List<Target>> of(String name, LogicalPlan parsed) {
        Optional<List<Target>> sql = ofSql(parsed);
        return sql.isPresent() ? sql : ofWriter(name, parsed);
    }

    /** What a write statement of SQL's writes: INSERT, DELETE, UPDATE, MERGE, INSERT
     *  OVERWRITE DIRECTORY; empty for another. */
    private Optional<List<Target>> ofSql(LogicalPlan parsed) {
        if (parsed instanceof InsertIntoStatement) {
            return Optional.of(insert((InsertIntoStatement) parsed));
        }
        if (parsed instanceof DeleteFromTable) {
            return Optional.of(names.onTable(((DeleteFromTable) parsed).table(), Mode.EXCLUSIVE));
        }
        if (parsed instanceof UpdateTable) {
            return Optional.of(names.onTable(((UpdateTable) parsed).table(), Mode.EXCLUSIVE));
        }
        if (parsed instanceof MergeIntoTable) {
            return Optional.of(names.onTable(((MergeIntoTable) parsed).targetTable(),
                Mode.EXCLUSIVE));
        }
        if (parsed instanceof InsertIntoDir) {
            scala.Option<URI> location = ((InsertIntoDir) parsed).storage().locationUri();
            return Optional.of(location.isDefined() ? names.tablesAt(location.get().toString())
                : new ArrayList<>());
        }
        return Optional.empty();
    }

    /** X on an INSERT's table, or on its static partition prefix. */
    private List<Target> insert(InsertIntoStatement ins) {
        Target table = names.namedTable(ins.table(), Mode.EXCLUSIVE);
        if (table == null) {
            return new ArrayList<>();
        }
        Map<String, String> spec = new LinkedHashMap<>();
        Iterator<scala.Tuple2<String, scala.Option<String>>> it = ins.partitionSpec().iterator();
        while (it.hasNext()) {
            scala.Tuple2<String, scala.Option<String>> kv = it.next();
            spec.put(kv._1(), kv._2().isDefined() ? String.valueOf(kv._2().get()) : null);
        }
        return CatalogTargets.one(names.staticPrefix(table, spec));
    }

    /** What a DataFrameWriter's command writes (saveAsTable, save of files or to a data
     *  source, a V2 write); empty for another. */
    private Optional<List<Target>> ofWriter(String name, LogicalPlan parsed) {
        SavedTable saved = savedTable(parsed);
        if (saved != null) {
            return Optional.of(saveAsTable(saved));
        }
        if (parsed instanceof InsertIntoHadoopFsRelationCommand) {
            // DataFrameWriter.save of files (parquet, csv, ...): built by Spark as it runs
            InsertIntoHadoopFsRelationCommand cmd = (InsertIntoHadoopFsRelationCommand) parsed;
            if (cmd.catalogTable().isEmpty()) {
                return Optional.of(new ArrayList<>());  // the tables at its path: pathInserts
            }
            Target table = names.tableTarget(
                CatalogTargets.parts(cmd.catalogTable().get().identifier()), Mode.EXCLUSIVE);
            return Optional.of(table == null ? new ArrayList<>()
                : CatalogTargets.one(names.staticPrefix(table,
                    CatalogTargets.mapping(cmd.staticPartitions()))));
        }
        if (parsed instanceof SaveIntoDataSourceCommand) {
            // DataFrameWriter.save to a data source: the catalog tables stored at its path
            scala.Option<String> path = ((SaveIntoDataSourceCommand) parsed).options().get("path");
            return Optional.of(path.isDefined() ? names.tablesAt(path.get()) : new ArrayList<>());
        }
        if (parsed instanceof V2WriteCommand) {
            return Optional.of(v2Write(name, (LogicalPlan) ((V2WriteCommand) parsed).table()));
        }
        return Optional.empty();
    }

    /** X on a file-source INSERT's target, read off the analyzed command, where Spark has
     *  resolved its static partition values; empty for any other command. */
    Optional<Target> insertTarget(LogicalPlan analyzed) {
        if (!(analyzed instanceof InsertIntoHadoopFsRelationCommand)) {
            return Optional.empty();
        }
        InsertIntoHadoopFsRelationCommand cmd = (InsertIntoHadoopFsRelationCommand) analyzed;
        if (cmd.catalogTable().isEmpty()) {
            return Optional.empty();
        }
        CatalogTable table = cmd.catalogTable().get();
        Map<String, String> spec = new HashMap<>(CatalogTargets.mapping(cmd.staticPartitions()));
        return Optional.of(CatalogTargets.prefix(walker.table(table, Mode.EXCLUSIVE),
            PartitionPins.partitionColumns(table), spec));
    }

    /** X on the catalog tables whose files an insert into a path writes: a temporary view
     *  USING parquet OPTIONS (path '<a table's location>') is that table. */
    List<Target> pathInserts(LogicalPlan analyzed) {
        List<Target> out = new ArrayList<>();
        List<LogicalPlan> pending = new ArrayList<>();
        pending.add(analyzed);
        while (!pending.isEmpty()) {
            LogicalPlan node = pending.remove(pending.size() - 1);
            if (node instanceof InsertIntoHadoopFsRelationCommand) {
                InsertIntoHadoopFsRelationCommand cmd = (InsertIntoHadoopFsRelationCommand) node;
                if (cmd.catalogTable().isEmpty()) {
                    out.addAll(names.tablesAt(cmd.outputPath().toString()));
                }
                continue;
            }
            Seq<LogicalPlan> kids = node.children();
            for (int i = 0; i < kids.size(); i++) {
                pending.add(kids.apply(i));
            }
        }
        return out;
    }

    /** DataFrameWriter.saveAsTable of a session-catalog table: X on it and on the tables at
     *  its path option, S on what its query reads (a field Spark's tree walks do not visit). */
    private List<Target> saveAsTable(SavedTable saved) {
        Target table = names.tableTarget(CatalogTargets.parts(saved.table().identifier()),
            Mode.EXCLUSIVE);
        List<Target> out = new ArrayList<>();
        if (table != null) {
            out.add(table);
        }
        scala.Option<URI> location = saved.table().storage().locationUri();
        if (location.isDefined()) {
            out.addAll(names.tablesAt(location.get().toString()));
        }
        if (saved.query() != null) {
            out.addAll(walker.reads(saved.query(), true, false));
        }
        return out;
    }

    /** AppendData, OverwriteByExpression (Spark 4.0's REPLACE WHERE), ...: the table is a
     *  field, not a child (the child is the query). A table given already resolved (a
     *  DataSource V2 save) has no name here: refused, never written unlocked. */
    private List<Target> v2Write(String name, LogicalPlan written) {
        if (!names.ident(written).isEmpty()) {
            return names.onTable(written, Mode.EXCLUSIVE);
        }
        if (written instanceof org.apache.spark.sql.execution.datasources.v2
                .DataSourceV2Relation) {
            return resolvedV2Write((org.apache.spark.sql.execution.datasources.v2
                .DataSourceV2Relation) written);
        }
        throw LockAnswer.unsupported("zklock cannot tell which table " + name
            + " writes (" + PlanWalker.nodeName(written) + "); the statement was not run");
    }

    /** A V2 write Spark hands over with its table resolved (DataFrameWriter.save to a
     *  DataSource V2 source): X on the catalog table it names; without a catalog table (a
     *  path, or a sink such as noop), X on the catalog tables at its path, as a v1 save. */
    private List<Target> resolvedV2Write(
            DataSourceV2Relation relation) {
        if (relation.identifier().isDefined()) {
            Identifier id = relation.identifier().get();
            if (id.namespace().length == 0) {
                throw LockAnswer.unsupported("zklock cannot tell which database a write to "
                    + id + " is in; the statement was not run");
            }
            List<String> parts = new ArrayList<>(Arrays.asList(id.namespace()));
            parts.add(id.name());
            Target table = names.tableTarget(parts, Mode.EXCLUSIVE);
            if (table == null) {
                throw LockAnswer.unsupported("zklock cannot tell which table a write to "
                    + id + " is; the statement was not run");
            }
            return CatalogTargets.one(table);
        }
        String path = relation.options().get("path");
        return path == null ? new ArrayList<>() : names.tablesAt(path);
    }

    /** The table a DataFrame is saved as, whichever command the Spark line runs for it. */
    private static SavedTable savedTable(LogicalPlan parsed) {
        if (parsed instanceof CreateTable) {
            CreateTable create =
                (CreateTable) parsed;
            return new SavedTable(create.tableDesc(),
                create.query().isDefined() ? create.query().get() : null);
        }
        return SaveAsTable.command(parsed);
    }
}
