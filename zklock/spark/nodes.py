"""What each Catalyst plan node means to zklock: the one classification the planner uses.

Every logical plan class of the installed Spark that can appear in a parsed or
analyzed plan has a :class:`NodeKind` here. The planner consults this table for
every node of every statement, not only the root: a write nested in a
``Union`` (Hive's multi-insert ``FROM src INSERT INTO a ... INSERT INTO b ...``),
below a CTE, inside a SQL script or behind ``EXECUTE IMMEDIATE`` is found the
same way as a plain ``INSERT``.

A node that is a Catalyst ``Command`` (or looks like a write) and is *not* in
this table is unknown, and the statement holding it is refused (or locked
conservatively, when ``unknown_statements=lock``): a lock manager must never
let a write through because it did not recognise it. tests/spark/test_spark_nodes.py
enumerates the plan classes of the installed Spark's jars through the JVM and
fails when one appears that is not classified here, so a Spark upgrade cannot
open a hole silently.

Hive decides from its compiler's list of write entities (``WriteEntity``),
which every statement type fills in; Catalyst has no such list, so the table
below plays that role.
"""

from __future__ import annotations

import enum


class NodeKind(enum.Enum):
    """How a plan node takes part in locking."""

    QUERY = "query"          #: a relational operator or relation: reads are found by the walk
    NO_LOCKS = "no locks"    #: a command that touches no shared table data or metadata
    TABLE_X = "X on table"   #: a statement taking X on the table or view it names
    DATABASE_X = "X on db"   #: a statement taking X on the database it names
    STATEMENT = "statement"  #: a statement with a rule of its own in the planner
    READS = "reads"          #: a command whose only effect on tables is reading its query
    RESOLVED = "resolved"    #: the analyzed (runnable) form of a statement planned above
    SCRIPT = "script"        #: a SQL scripting construct (BEGIN ... END and its statements)
    EXECUTE = "execute"      #: EXECUTE IMMEDIATE: the statement is in its text
    REFUSED = "refused"      #: a write path zklock does not lock: always refused


def _kinds(kind: NodeKind, names: str) -> dict[str, NodeKind]:
    return {name: kind for name in names.split()}


#: Relational operators, relations and plan helpers: they never write.
QUERY = frozenset("""
    Aggregate AppendColumns AppendColumnsWithObject ArrowEvalPython ArrowEvalPythonUDTF AsOfJoin
    AttachDistributedSequence BatchEvalPython BatchEvalPythonUDTF BinBy CTERelationDef
    CTERelationRef CoGroup CollectMetrics DataFrameDropColumns DataSourceV2Relation
    DataSourceV2ScanRelation Deduplicate DeduplicateWithinWatermark DeserializeToObject Distinct
    DomainJoin DummyExpressionHolder EmptyRelation EventTimeWatermark Except Expand ExternalRDD
    Filter FlatMapCoGroupsInArrow FlatMapCoGroupsInPandas FlatMapGroupsInArrow
    FlatMapGroupsInPandas FlatMapGroupsInPandasWithState FlatMapGroupsInR
    FlatMapGroupsInRWithArrow FlatMapGroupsWithState GeneralParameterizedQuery Generate
    GlobalLimit HiveTableRelation InMemoryRelation Intersect Join LateralJoin LimitAll LocalLimit
    LocalRelation LogicalQueryStage LogicalRDD LogicalRelation MapElements MapGroups MapInArrow
    MapInPandas MapPartitions MapPartitionsExternalUDF MapPartitionsInR MapPartitionsInRWithArrow
    MergeRows MetricViewPlaceholder NameParameterizedQuery NearestByJoin
    NonGroupingAggregateReference Offset OneRowRelation OrderedJoin PipeOperator Pivot
    PlanWithUnresolvedIdentifier PosParameterizedQuery Project PythonWorkerLogs Range
    RebalancePartitions RelationChanges RelationTimeTravel Repartition RepartitionByExpression
    ResolvedHint ResolvedIdentifier ResolvedInlineTable ResolvedMetricView ResolvedNamespace
    ResolvedNonPersistentFunc ResolvedPersistentFunc ResolvedPersistentView ResolvedProcedure
    ResolvedTable ResolvedTempView ReturnAnswer SQLFunctionNode SQLTableFunction Sample
    ScanBuilderHolder ScriptTransformation SerializeFromObject Sort Subquery SubqueryAlias Tail
    TemporaryViewRelation TransformWithState TransformWithStateInPySpark Transpose TypedFilter
    Union UnionLoop UnionLoopRef Unpivot UnresolvedBinBy UnresolvedCatalogRelation
    UnresolvedCteRelationRef UnresolvedDataSource UnresolvedDeduplicate
    UnresolvedEventTimeWatermark UnresolvedFunctionName UnresolvedHaving UnresolvedHint
    UnresolvedIdentifier UnresolvedInlineTable UnresolvedNamespace UnresolvedQualify
    UnresolvedRelation UnresolvedSubqueryColumnAliases UnresolvedTVFAliases UnresolvedTable
    UnresolvedTableOrView UnresolvedTableValuedFunction UnresolvedTranspose UnresolvedView
    UnresolvedWith UpdateEventTimeWatermarkColumn V2ChangelogReference V2TableReference View
    Window WindowGroupLimit WithCTE WithWindowDefinition Zip CommandResult OffsetHolder
    UnresolvedProcedure UnresolvedFunction CurrentNamespace
""".split())

#: Commands that touch no table data or metadata that others could change under them:
#: session state, listings and descriptions (Hive takes no lock for SHOW/DESCRIBE either),
#: temporary objects, functions, resources, and EXPLAIN (which runs nothing).
NO_LOCKS = frozenset("""
    SetCommand ResetCommand SetCatalogAndNamespace SetCatalogCommand SetNamespaceCommand
    SetPathCommand ShowTables ShowTablesCommand ShowTablesExtended ShowTablesJsonCommand
    ShowNamespaces ShowNamespacesCommand ShowViews ShowViewsCommand ShowColumns
    ShowColumnsCommand ShowPartitions ShowPartitionsCommand ShowPartitionsJsonCommand
    ShowTableProperties ShowTablePropertiesCommand ShowCreateTable ShowCreateTableCommand
    ShowCreateTableAsSerdeCommand ShowFunctions ShowFunctionsCommand ShowCatalogsCommand
    ShowCurrentNamespaceCommand ShowTableExtended ShowTablePartition ShowCollationsCommand
    ShowProceduresCommand DescribeRelation DescribeTableCommand DescribeRelationJsonCommand
    DescribeTablePartition DescribeColumn DescribeColumnCommand DescribeNamespace
    DescribeDatabaseCommand DescribeFunction DescribeFunctionCommand DescribeProcedureCommand
    DescribeQueryCommand ExplainCommand StreamingExplainCommand UncacheTable ClearCacheCommand
    RefreshTable RefreshTableCommand RefreshFunction RefreshFunctionCommand RefreshResource
    AddJarsCommand AddFilesCommand AddArchivesCommand ListJarsCommand ListFilesCommand
    ListArchivesCommand CreateFunction CreateFunctionCommand CreateUserDefinedFunction
    CreateSQLFunctionCommand DropFunction DropFunctionCommand CreateTempViewUsing
    CreateViewCommand DropTempViewCommand CreateVariable DropVariable ShowVariable NoopCommand
""".split())

#: X on the table or view the statement names (Hive: ALTER TABLE, DROP TABLE, ...; plus the
#: DDL and row-level DML Spark has).
TABLE_X = frozenset("""
    CreateTable CreateTableAsSelect ReplaceTable ReplaceTableAsSelect CreateView AlterViewAs
    AlterViewSchemaBinding DropView DropTable TruncateTable RepairTable RecoverPartitions
    AddColumns ReplaceColumns AlterColumns AlterColumn RenameColumn DropColumns
    SetTableProperties UnsetTableProperties SetViewProperties UnsetViewProperties CommentOnTable
    AlterTableCollation AlterTableClusterBy DeleteFromTable UpdateTable MergeIntoTable
    OverwriteByExpression OverwritePartitionsDynamic AppendData ReplaceData WriteDelta
    SetTableLocation CreateIndex DropIndex AddConstraint DropConstraint AddCheckConstraint
    CreateTableLike CreateMetricView InsertOnlyMerge DeleteFromTableWithFilters
""".split())

#: X on the database the statement names.
DATABASE_X = frozenset("""
    CreateNamespace DropNamespace SetNamespaceProperties SetNamespaceLocation
    UnsetNamespaceProperties CommentOnNamespace
""".split())

#: Parsed statements with a rule of their own in LockPlanner._writes.
STATEMENT = frozenset("""
    InsertIntoStatement AddPartitions DropPartitions RenamePartitions TruncatePartition LoadData
    SetTableSerDeProperties AnalyzeTable AnalyzeColumn AnalyzeTables RenameTable InsertIntoDir
""".split())

#: Commands whose only effect on tables is to read their query (S on what it reads).
READS = frozenset("""
    CacheTable CacheTableAsSelect SetVariable DeclareCursor OpenCursor FetchCursor CloseCursor
""".split())

#: The analyzed forms Spark's analyzer turns the statements above into. They are planned
#: from the parsed statement; here they only have to be known.
RESOLVED = frozenset("""
    AlterDatabasePropertiesCommand AlterDatabaseSetLocationCommand AlterTableAddColumnsCommand
    AlterTableAddPartitionCommand AlterTableChangeColumnCommand
    AlterTableChangeColumnCommentsCommand AlterTableDropPartitionCommand AlterTableRenameCommand
    AlterTableRenamePartitionCommand AlterTableSerDePropertiesCommand
    AlterTableSetLocationCommand AlterTableSetPropertiesCommand AlterTableUnsetPropertiesCommand
    AlterViewAsCommand AlterViewSchemaBindingCommand AnalyzeColumnCommand AnalyzePartitionCommand
    AnalyzeTableCommand AnalyzeTablesCommand CreateDataSourceTableAsSelectCommand
    CreateDataSourceTableCommand CreateDatabaseCommand CreateHiveTableAsSelectCommand
    CreateTableCommand CreateTableLikeCommand CreateMetricViewCommand DropDatabaseCommand
    DropTableCommand InsertIntoDataSourceCommand InsertIntoDataSourceDirCommand
    InsertIntoHadoopFsRelationCommand InsertIntoHiveDirCommand InsertIntoHiveTable
    LoadDataCommand RepairTableCommand TruncateTableCommand SetNamespaceCollationCommand
    UnsetNamespacePropertiesCommand CacheTableCommand WriteFiles SaveIntoDataSourceCommand
    SaveAsV1TableCommand
""".split())

#: SQL scripting (``BEGIN ... END``): planned statement by statement, locked as one set.
SCRIPT = frozenset("""
    CompoundBody SingleStatement IfElseStatement WhileStatement ForStatement RepeatStatement
    LoopStatement LeaveStatement IterateStatement SearchedCaseStatement SimpleCaseStatement
    ExceptionHandler ErrorCondition MultiResult
""".split())

#: Writes zklock does not lock, refused whatever the policy for unknown statements says:
#: streaming sinks (a query that writes forever cannot hold a statement's locks),
#: declarative pipelines, stored procedures (``CALL``: their writes are not in the plan)
#: and external commands.
REFUSED = frozenset("""
    Call ExternalCommandExecutor CreateFlowCommand CreateStreamingTable
    CreateStreamingTableAsSelect CreateStreamingTableAutoCdc CreateMaterializedViewAsSelect
    AutoCdcInto WriteToStream WriteToStreamStatement WriteToDataSourceV2
    WriteToContinuousDataSource WriteToMicroBatchDataSource WriteToMicroBatchDataSourceV1
    MemoryPlan StreamingRelation StreamingRelationV2 StreamingExecutionRelation
    StreamingDataSourceV2Relation StreamingDataSourceV2ScanRelation NamedStreamingRelation
    SequentialStreamingUnion UnresolvedInsert UnresolvedInsertTarget
""".split())

NODE_KINDS: dict[str, NodeKind] = {}
for _kind, _names in ((NodeKind.QUERY, QUERY), (NodeKind.NO_LOCKS, NO_LOCKS),
                      (NodeKind.TABLE_X, TABLE_X), (NodeKind.DATABASE_X, DATABASE_X),
                      (NodeKind.STATEMENT, STATEMENT), (NodeKind.READS, READS),
                      (NodeKind.RESOLVED, RESOLVED), (NodeKind.SCRIPT, SCRIPT),
                      (NodeKind.REFUSED, REFUSED)):
    for _name in _names:
        NODE_KINDS.setdefault(_name, _kind)
NODE_KINDS["UnresolvedExecuteImmediate"] = NodeKind.EXECUTE
NODE_KINDS["ExecuteImmediateCommand"] = NodeKind.EXECUTE

#: Statements that write (or may write) tables: what a nested occurrence is checked for.
WRITES = frozenset(n for n, k in NODE_KINDS.items()
                   if k in (NodeKind.TABLE_X, NodeKind.DATABASE_X, NodeKind.STATEMENT,
                            NodeKind.RESOLVED, NodeKind.REFUSED, NodeKind.EXECUTE))

#: Words in a class name that mark an unknown, non-Command node as a possible write.
WRITE_WORDS = ("Insert", "Write", "Merge", "Update", "Delete", "Overwrite", "Append",
               "Call", "Procedure", "Execute", "Cdc", "Save", "Create", "Drop", "Alter",
               "Truncate", "Load", "Statement", "Cursor", "Command")


def kind_of(name: str) -> NodeKind | None:
    """The kind of a plan node class (its simple name); None when zklock does not know it."""
    return NODE_KINDS.get(name)


def is_unknown_write(name: str, is_command: bool) -> bool:
    """True for a node zklock does not know and that is, or may be, a write: a Catalyst
    ``Command``, or a name that says it inserts, writes, merges, calls ..."""
    if name in NODE_KINDS:
        return False
    return is_command or any(word in name for word in WRITE_WORDS)
