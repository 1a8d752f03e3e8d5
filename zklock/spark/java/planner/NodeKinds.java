// What each Catalyst logical plan class means to zklock: the one classification the planner
// (LockPlanner.java) uses, for every node of every statement, not only the root. A write
// nested in a Union (Hive's multi-insert), below a CTE, inside a SQL script or behind
// EXECUTE IMMEDIATE is found the same way as a plain INSERT.
//
// Hive decides from its compiler's list of write entities (WriteEntity), which every
// statement type fills in; Catalyst has no such list, so this table plays that role. A node
// that is a Catalyst Command (or whose name says it writes) and is not in it is unknown, and
// the statement holding it is refused, or locked conservatively with
// zklock.unknown.statements=lock: a lock manager must never let a write through because it
// did not recognise it. tests/spark/test_spark_nodes.py lists the plan classes of the
// installed Spark's jars and fails on any that this table does not classify, so a Spark
// upgrade cannot open a hole silently.
package zklock.planner;

import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

public final class NodeKinds {
    /** An unmodifiable set of names (Set.of, which the Java 8 that Spark 3.5 runs on lacks). */
    public static Set<String> setOf(String... names) {
        return Collections.unmodifiableSet(new HashSet<>(Arrays.asList(names)));
    }

    /** How a plan node takes part in locking. */
    public enum Kind {
        /** A relational operator or relation: reads are found by the walk. */
        QUERY,
        /** A command that touches no shared table data or metadata. */
        NO_LOCKS,
        /** A statement taking X on the table or view it names. */
        TABLE_X,
        /** A statement taking X on the database it names. */
        DATABASE_X,
        /** A statement with a rule of its own in the planner. */
        STATEMENT,
        /** A command whose only effect on tables is reading its query. */
        READS,
        /** The analyzed (runnable) form of a statement planned from its parsed form. */
        RESOLVED,
        /** A SQL scripting construct (BEGIN ... END and its statements). */
        SCRIPT,
        /** EXECUTE IMMEDIATE: the statement is in its text. */
        EXECUTE,
        /** A write path zklock does not lock: always refused. */
        REFUSED
    }

    /** Words in a class name that mark an unknown node that is not a Command as a possible write. */
    static final List<String> WRITE_WORDS = Arrays.asList(
        "Insert", "Write", "Merge", "Update", "Delete", "Overwrite", "Append", "Call",
        "Procedure", "Execute", "Cdc", "Save", "Create", "Drop", "Alter", "Truncate", "Load",
        "Statement", "Cursor", "Command");

    private static final Map<String, Kind> KINDS = new ConcurrentHashMap<>();

    static {
        /* Relational operators, relations and plan helpers: they never write. */
        add(Kind.QUERY,
            "Aggregate AppendColumns AppendColumnsWithObject ArrowEvalPython"
            + " ArrowEvalPythonUDTF AsOfJoin AttachDistributedSequence BatchEvalPython"
            + " BatchEvalPythonUDTF BinBy CTERelationDef CTERelationRef CoGroup CollectMetrics"
            + " CommandResult CurrentNamespace DataFrameDropColumns DataSourceV2Relation"
            + " DataSourceV2ScanRelation Deduplicate DeduplicateWithinWatermark"
            + " DeserializeToObject Distinct DomainJoin DummyExpressionHolder EmptyRelation"
            + " EventTimeWatermark Except Expand ExternalRDD Filter FlatMapCoGroupsInArrow"
            + " FlatMapCoGroupsInPandas FlatMapGroupsInArrow FlatMapGroupsInPandas"
            + " FlatMapGroupsInPandasWithState FlatMapGroupsInR FlatMapGroupsInRWithArrow"
            + " FlatMapGroupsWithState GeneralParameterizedQuery Generate GlobalLimit"
            + " HiveTableRelation InMemoryRelation Intersect Join LateralJoin LimitAll"
            + " LocalLimit LocalRelation LogicalQueryStage LogicalRDD LogicalRelation"
            + " MapElements MapGroups MapInArrow MapInPandas MapPartitions"
            + " MapPartitionsExternalUDF MapPartitionsInR MapPartitionsInRWithArrow MergeRows"
            + " MetricViewPlaceholder NameParameterizedQuery NearestByJoin"
            + " NonGroupingAggregateReference Offset OffsetHolder OneRowRelation OrderedJoin"
            + " PipeOperator Pivot PlanWithUnresolvedIdentifier PosParameterizedQuery Project"
            + " PythonMapInArrow"
            + " PythonWorkerLogs Range RebalancePartitions RelationChanges RelationTimeTravel"
            + " Repartition RepartitionByExpression ResolvedHint ResolvedIdentifier"
            + " ResolvedInlineTable ResolvedMetricView ResolvedNamespace"
            + " ResolvedNonPersistentFunc ResolvedPersistentFunc ResolvedPersistentView"
            + " ResolvedProcedure ResolvedTable ResolvedTempView ReturnAnswer SQLFunctionNode"
            + " SQLTableFunction Sample ScanBuilderHolder ScriptTransformation"
            + " SerializeFromObject Sort Subquery SubqueryAlias Tail TemporaryViewRelation"
            + " TransformWithState TransformWithStateInPandas TransformWithStateInPySpark"
            + " Transpose TypedFilter Union"
            + " UnionLoop UnionLoopRef Unpivot UnresolvedBinBy UnresolvedCatalogRelation"
            + " UnresolvedCteRelationRef UnresolvedDataSource UnresolvedDeduplicate"
            + " UnresolvedEventTimeWatermark UnresolvedFunction UnresolvedFunctionName"
            + " UnresolvedHaving UnresolvedHint UnresolvedIdentifier UnresolvedInlineTable"
            + " UnresolvedNamespace UnresolvedProcedure UnresolvedQualify UnresolvedRelation"
            + " UnresolvedSubqueryColumnAliases UnresolvedTVFAliases UnresolvedTable"
            + " UnresolvedTableOrView UnresolvedTableValuedFunction UnresolvedTranspose"
            + " UnresolvedView UnresolvedWith UpdateEventTimeWatermarkColumn"
            + " V2ChangelogReference V2TableReference View Window WindowGroupLimit WithCTE"
            + " WithWindowDefinition Zip");
        /* Commands that touch no table data or metadata others could change under them:
         * session state, listings and descriptions (Hive takes no lock for SHOW/DESCRIBE
         * either), temporary objects, functions, resources, and EXPLAIN (which runs nothing). */
        add(Kind.NO_LOCKS,
            "AddArchivesCommand AddFilesCommand AddJarsCommand ClearCacheCommand"
            + " CreateFunction CreateFunctionCommand CreateSQLFunctionCommand"
            + " CreateTempViewUsing CreateUserDefinedFunction CreateVariable CreateViewCommand"
            + " DescribeColumn DescribeColumnCommand DescribeDatabaseCommand DescribeFunction"
            + " DescribeFunctionCommand DescribeNamespace DescribeProcedureCommand"
            + " DescribeQueryCommand DescribeRelation DescribeRelationJsonCommand"
            + " DescribeTableCommand DescribeTablePartition DropFunction DropFunctionCommand"
            + " DropTempViewCommand DropVariable ExplainCommand ListArchivesCommand"
            + " ListFilesCommand ListJarsCommand NoopCommand RefreshFunction"
            + " RefreshFunctionCommand RefreshResource RefreshTable RefreshTableCommand"
            + " ResetCommand SetCatalogAndNamespace SetCatalogCommand SetCommand"
            + " SetNamespaceCommand SetPathCommand ShowCatalogsCommand ShowCollationsCommand"
            + " ShowColumns ShowColumnsCommand ShowCreateTable ShowCreateTableAsSerdeCommand"
            + " ShowCreateTableCommand ShowCurrentNamespaceCommand ShowFunctions"
            + " ShowFunctionsCommand ShowNamespaces ShowNamespacesCommand ShowPartitions"
            + " ShowPartitionsCommand ShowPartitionsJsonCommand ShowProceduresCommand"
            + " ShowTableExtended ShowTablePartition ShowTableProperties"
            + " ShowTablePropertiesCommand ShowTables ShowTablesCommand ShowTablesExtended"
            + " ShowTablesJsonCommand ShowVariable ShowViews ShowViewsCommand"
            + " StreamingExplainCommand UncacheTable");
        /* X on the table or view the statement names (Hive: ALTER TABLE, DROP TABLE, ...;
         * plus the DDL and row-level DML Spark has). */
        add(Kind.TABLE_X,
            "AddCheckConstraint AddColumns AddConstraint AlterColumn AlterColumns"
            + " AlterTableClusterBy AlterTableCollation AlterViewAs AlterViewSchemaBinding"
            + " AppendData CommentOnTable CreateIndex CreateMetricView CreateTable"
            + " CreateTableAsSelect CreateTableLike CreateView DeleteFromTable"
            + " DeleteFromTableWithFilters DropColumns DropConstraint DropIndex DropTable"
            + " DropView InsertOnlyMerge MergeIntoTable OverwriteByExpression"
            + " OverwritePartitionsDynamic RecoverPartitions RenameColumn RepairTable"
            + " ReplaceColumns ReplaceData ReplaceTable ReplaceTableAsSelect SetTableLocation"
            + " SetTableProperties SetViewProperties TruncateTable UnsetTableProperties"
            + " UnsetViewProperties UpdateTable WriteDelta");
        /* X on the database the statement names. */
        add(Kind.DATABASE_X,
            "CommentOnNamespace CreateNamespace DropNamespace SetNamespaceLocation"
            + " SetNamespaceProperties UnsetNamespaceProperties");
        /* Parsed statements with a rule of their own in DataWrites.java and DdlWrites.java. */
        add(Kind.STATEMENT,
            "AddPartitions AnalyzeColumn AnalyzeTable AnalyzeTables DropPartitions"
            + " InsertIntoDir InsertIntoHadoopFsRelationCommand InsertIntoStatement LoadData"
            + " RenamePartitions RenameTable RepairTableCommand SaveAsV1TableCommand"
            + " SaveIntoDataSourceCommand"
            + " SetTableSerDeProperties"
            + " TruncatePartition");
        /* Commands whose only effect on tables is to read their query (S on what it reads). */
        add(Kind.READS,
            "CacheTable CacheTableAsSelect CloseCursor DeclareCursor FetchCursor OpenCursor"
            + " SetVariable");
        /* The analyzed forms Spark's analyzer turns the statements above into. They are
         * planned from the parsed statement; here they only have to be known. */
        add(Kind.RESOLVED,
            "AlterDatabasePropertiesCommand AlterDatabaseSetLocationCommand"
            + " AlterTableAddColumnsCommand AlterTableAddPartitionCommand"
            + " AlterTableChangeColumnCommand AlterTableChangeColumnCommentsCommand"
            + " AlterTableDropPartitionCommand AlterTableRenameCommand"
            + " AlterTableRenamePartitionCommand AlterTableSerDePropertiesCommand"
            + " AlterTableSetLocationCommand AlterTableSetPropertiesCommand"
            + " AlterTableUnsetPropertiesCommand AlterViewAsCommand"
            + " AlterViewSchemaBindingCommand AnalyzeColumnCommand AnalyzePartitionCommand"
            + " AnalyzeTableCommand AnalyzeTablesCommand CacheTableCommand"
            + " CreateDataSourceTableAsSelectCommand CreateDataSourceTableCommand"
            + " CreateDatabaseCommand CreateHiveTableAsSelectCommand CreateMetricViewCommand"
            + " CreateTableCommand CreateTableLikeCommand DropDatabaseCommand DropTableCommand"
            + " InsertIntoDataSourceCommand InsertIntoDataSourceDirCommand"
            + " InsertIntoHiveDirCommand InsertIntoHiveTable"
            + " LoadDataCommand SetNamespaceCollationCommand"
            + " TruncateTableCommand"
            + " UnsetNamespacePropertiesCommand WriteFiles");
        /* SQL scripting (BEGIN ... END): planned statement by statement, locked as one set. */
        add(Kind.SCRIPT,
            "CompoundBody ErrorCondition ExceptionHandler ForStatement IfElseStatement"
            + " IterateStatement LeaveStatement LoopStatement MultiResult RepeatStatement"
            + " SearchedCaseStatement SimpleCaseStatement SingleStatement WhileStatement");
        /* Writes zklock does not lock, refused whatever the policy for unknown statements
         * says: streaming sinks (a query that writes for ever cannot hold a statement's
         * locks), declarative pipelines, stored procedures (CALL: their writes are not in the
         * plan) and external commands. */
        add(Kind.REFUSED,
            "AutoCdcInto Call CreateFlowCommand CreateMaterializedViewAsSelect"
            + " CreateStreamingTable CreateStreamingTableAsSelect CreateStreamingTableAutoCdc"
            + " ExternalCommandExecutor MemoryPlan NamedStreamingRelation"
            + " SequentialStreamingUnion StreamingDataSourceV2Relation"
            + " StreamingDataSourceV2ScanRelation StreamingExecutionRelation StreamingRelation"
            + " StreamingRelationV2 UnresolvedInsert UnresolvedInsertTarget"
            + " WriteToContinuousDataSource WriteToDataSourceV2 WriteToMicroBatchDataSource"
            + " WriteToMicroBatchDataSourceV1 WriteToStream WriteToStreamStatement");
        add(Kind.EXECUTE,
            "UnresolvedExecuteImmediate ExecuteImmediateQuery ExecuteImmediateCommand");
    }

    private NodeKinds() {
    }

    private static void add(Kind kind, String names) {
        for (String name : names.split(" ")) {
            KINDS.putIfAbsent(name, kind);
        }
    }

    /** The kind of a plan node class (its simple name, without Scala's '$'); null when unknown. */
    public static Kind kindOf(String name) {
        return KINDS.get(name);
    }

    /** The whole table: class name -> kind name. */
    public static Map<String, String> table() {
        Map<String, String> out = new TreeMap<>();
        for (Map.Entry<String, Kind> e : KINDS.entrySet()) {
            out.put(e.getKey(), e.getValue().name());
        }
        return out;
    }

    public static boolean is(String name, Kind kind) {
        return KINDS.get(name) == kind;
    }

    /** A node zklock does not know and that is, or may be, a write: a Catalyst Command, or a
     *  name that says it inserts, writes, merges, calls ... */
    public static boolean isUnknownWrite(String name, boolean isCommand) {
        if (KINDS.containsKey(name)) {
            return false;
        }
        if (isCommand) {
            return true;
        }
        for (String word : WRITE_WORDS) {
            if (name.contains(word)) {
                return true;
            }
        }
        return false;
    }

    /** Forget {@code names} (returned with their kinds, for {@link #restore}): what a Spark
     *  with commands zklock never classified looks like. For tests of that refusal only. */
    public static synchronized Map<String, Kind> unclassify(List<String> names) {
        Map<String, Kind> removed = new HashMap<>();
        for (String name : names) {
            Kind kind = KINDS.remove(name);
            if (kind != null) {
                removed.put(name, kind);
            }
        }
        return removed;
    }

    public static synchronized void restore(Map<String, Kind> removed) {
        KINDS.putAll(removed);
    }

    /** How many node classes the table classifies. */
    public static int size() {
        return KINDS.size();
    }
}
