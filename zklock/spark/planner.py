"""LockPlanner: the S and X locks a Spark statement or DataFrame needs, from Spark's own plans.

Hive's lock table, applied to Catalyst instead of Hive's compiler:

* what a statement *writes* comes from the parsed plan, whose command nodes
  (``InsertIntoStatement``, ``AddPartitions``, ``DropTable`` ...) are the same
  whatever table format is behind them;
* what it *reads* comes from the analyzed plan, where views are expanded to
  their base tables and CTEs, subqueries, joins and unions are all visible.
  A read takes S on each permanent view and base table, and on each partition
  it scans: partitions pinned by ``=``/``IN`` on partition columns are locked
  one by one (existing or not); otherwise every existing partition that
  matches the pinned prefix is locked, as Hive does.
* a dynamic-partition insert takes X on the table, or on its static prefix.

Nothing here uses regular expressions on SQL text. Pins are only taken from
filters that provably apply to the scan (through projections, aliases, views,
inner joins and other filters); anything else falls back to the conservative
answer, which locks more, never less.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import unquote_plus

from ..errors import InvalidArguments, UnsupportedStatement
from ..lockrequest import LockTarget, normalize
from ..mode import Mode
from ..objects import LockObject, unescape_path_name
from . import nodes, walker
from .jvm import SparkJvm, option_text
from .nodes import NodeKind

log = logging.getLogger(__name__)

S, X = Mode.SHARED, Mode.EXCLUSIVE

#: Statements that define a view: their sources are locked at table level only.
VIEW_DDL = frozenset({"CreateView", "AlterViewAs"})
#: Parsed statements that are always commands (saves asking the JVM).
KNOWN_COMMANDS = nodes.TABLE_X | nodes.DATABASE_X | nodes.STATEMENT | nodes.READS
#: Parsed roots of plain queries (SELECT ...): commands only if one is nested in them.
KNOWN_QUERIES = frozenset({
    "Project", "Aggregate", "Filter", "Sort", "GlobalLimit", "LocalLimit", "Union", "Distinct",
    "Join", "Window", "Intersect", "Except", "Offset", "Tail", "UnresolvedHint",
})
#: Parsed nodes through which a nested statement is still run by Spark: a multi-insert is a
#: Union of inserts, and WITH ... INSERT puts the insert below the CTE definitions.
STATEMENT_CONTAINERS = frozenset({"Union", "UnresolvedWith"})
#: Parsed nodes naming a table (or view) a statement may read or write.
TABLE_NAMES = frozenset({"UnresolvedRelation", "UnresolvedTable", "UnresolvedTableOrView",
                         "UnresolvedView", "UnresolvedIdentifier"})
#: Nodes through which a parent's filter still constrains what a scan below reads.
FILTER_TRANSPARENT = frozenset({
    "Project", "SubqueryAlias", "View", "Filter", "Sort", "RepartitionByExpression",
    "Repartition", "ResolvedHint", "Distinct",
})
#: Common plan nodes with exactly one child (``child()``: one py4j call instead of three).
UNARY = frozenset({
    "Project", "Filter", "SubqueryAlias", "View", "Aggregate", "Sort", "GlobalLimit",
    "LocalLimit", "Distinct", "Window", "Generate", "Expand", "RepartitionByExpression",
    "Repartition", "ResolvedHint", "Deduplicate", "Offset", "Tail", "Pivot", "Sample",
    "InsertIntoHadoopFsRelationCommand", "InsertIntoHiveTable", "AppendData",
    "OverwriteByExpression", "OverwritePartitionsDynamic", "DeleteFromTable", "UpdateTable",
})
#: Plan nodes without children that are not tables.
LEAVES = frozenset({"LocalRelation", "OneRowRelation", "Range", "CTERelationRef",
                    "ResolvedIdentifier", "ResolvedNamespace", "LogicalRDD"})
#: Above this many pinned partitions, lock what exists instead of the cross product.
MAX_PINNED = 1000
_INTEGRAL = frozenset({"byte", "short", "integer", "long"})


@dataclass
class LockPlan:
    """The locks of one statement, and what the session needs to run it."""

    statement: str
    targets: list[LockTarget]
    is_command: bool = False
    parsed: Any = None
    analyzed: Any = None
    notes: list[str] = field(default_factory=list)
    qe: Any = None  # the QueryExecution behind ``analyzed`` (JVM walker only)
    #: SQL that Spark itself must drive (a script, EXECUTE IMMEDIATE): run with spark.sql
    text: Optional[str] = None
    #: seconds spent in Spark's analyzer (work Spark does anyway: the statement runs the
    #: plan analyzed here), so that zklock's own planning can be measured apart from it
    analysis_s: float = 0.0

    def rows(self) -> list[tuple[str, str]]:
        """(object, mode) in acquisition order."""
        return [(t.obj.name, t.mode.value) for t in self.targets]


@dataclass
class _Relation:
    obj: LockObject
    catalog_table: Any
    node: Any
    partition_cols: list[tuple[str, str]]


class LockPlanner:
    """Turns SQL text, an analyzed plan or a DataFrame into a normalised lock list."""

    def __init__(self, spark: Any, jvm_walker: bool = True,
                 unknown_statements: str = "refuse") -> None:
        self.jvm = SparkJvm(spark)
        self.walker = walker.load(spark) if jvm_walker else None
        #: refuse (default) or lock: what to do with a command zklock has no rule for
        self.unknown_statements = unknown_statements

    # ---- entry points -------------------------------------------------------
    def run(self, plan: LockPlan) -> Any:
        """Run a planned statement (locks are the caller's): the very plan it was analyzed
        into, so Spark does not parse and analyze it a second time."""
        if plan.text is not None:  # a script or EXECUTE IMMEDIATE: Spark drives it
            return self.jvm.spark.sql(plan.text)
        if plan.qe is not None and self.walker is not None:
            return self.jvm.run_query_execution(self.walker, plan.qe)
        return self.jvm.run(plan.analyzed if plan.analyzed is not None else plan.parsed)

    def plan_sql(self, sql: str, lazy_queries: bool = False, strict: bool = True) -> LockPlan:
        """Parse and analyze ``sql`` (raising Spark's own errors) and plan its locks."""
        parsed = self.jvm.parse(sql)
        return self.plan_parsed(parsed, strict=strict, lazy_queries=lazy_queries, text=sql)

    def plan_parsed(self, parsed: Any, strict: bool = True, lazy_queries: bool = False,
                    text: Optional[str] = None) -> LockPlan:
        """Locks of a parsed plan: every statement in it, wherever it is nested.

        ``strict=False`` (EXPLAIN LOCKS, statements of a SQL script) still plans a
        statement the analyzer rejects, from its parsed form alone, and says why in
        ``notes``. ``lazy_queries`` leaves a query's targets empty: its DataFrame plans
        them at each action. ``text`` is the statement's SQL, needed to run the forms
        Spark drives itself (scripts, EXECUTE IMMEDIATE).

        Raises :class:`~zklock.errors.UnsupportedStatement` for a write zklock cannot
        lock; an unknown command is refused, or locked conservatively when the
        ``unknown_statements`` policy is ``lock``.
        """
        name = node_name(parsed)
        if name in nodes.NO_LOCKS:
            return LockPlan(name, [], is_command=True, parsed=parsed)
        if name == "PlanWithUnresolvedIdentifier":
            raise InvalidArguments("zklock cannot tell which object IDENTIFIER(<expression>)"
                                   " names before the statement runs; name it literally")
        if name == "UnresolvedExecuteImmediate":
            return self._plan_execute_immediate(parsed, text, in_script=False)
        if name == "CompoundBody":
            return self._plan_script(parsed, text)
        census = self.census(parsed)
        statements = self._statements(parsed)
        self._refuse_unplannable(census, statements)
        unknown = self._unknown(census, statements)
        if unknown:
            return self._conservative(parsed, census, unknown, text)
        started = time.perf_counter()
        try:
            if self.walker is not None:
                qe, analyzed = self.jvm.query_execution(parsed)
            else:
                qe, analyzed = None, self.jvm.analyze(parsed)
        except Exception as exc:
            if strict:
                raise
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            specs = []
            for sname, snode in statements:
                specs += self._writes(sname, snode, True) + self._location_writes(sname, snode)
            specs += self._named_reads(census)
            return LockPlan(name, normalize(specs), True, parsed, None, text=text,
                            notes=[f"Spark's analyzer rejects this statement: {reason}"])
        analysis_s = time.perf_counter() - started
        analyzed_census = self.census(analyzed)
        unknown = self._unknown(analyzed_census, [])
        if unknown:
            return self._conservative(parsed, census, unknown, text)
        if statements:
            is_command = True
        elif name in KNOWN_QUERIES:
            is_command = False
        else:
            is_command = self.jvm.is_command(analyzed)
        if lazy_queries and not is_command:
            return LockPlan(name, [], False, parsed, analyzed, qe=qe, analysis_s=analysis_s)
        specs: list[tuple[LockObject, Mode]] = []
        for sname, snode in statements:
            insert = (self._insert_in_jvm(analyzed)
                      if snode is parsed and sname == "InsertIntoStatement"
                      and self.walker is not None else None)
            specs += insert if insert is not None else self._writes(sname, snode, True)
            specs += self._location_writes(sname, snode)
        if any(c == "InsertIntoHadoopFsRelationCommand" for c, _, _ in analyzed_census):
            specs += self._path_inserts(analyzed)
        specs += self.reads(analyzed, partitions=name not in VIEW_DDL, command=is_command)
        return LockPlan(name, normalize(specs), is_command, parsed, analyzed, qe=qe,
                        analysis_s=analysis_s)

    def _path_inserts(self, analyzed: Any) -> list[tuple[LockObject, Mode]]:
        """X on the catalog tables whose files an insert into a path writes: a temporary
        view ``USING parquet OPTIONS (path '<a table's location>')`` is that table."""
        out: list[tuple[LockObject, Mode]] = []
        pending = [analyzed]
        while pending:
            node = pending.pop()
            if node_name(node) == "InsertIntoHadoopFsRelationCommand":
                if node.catalogTable().isEmpty():
                    out += [(obj, X) for obj in self.tables_at(str(node.outputPath().toString()))]
                continue
            pending += self.jvm.items(node.children())
        return out

    # ---- what a statement holds: every node, every nested statement ---------------
    def census(self, plan: Any) -> list[tuple[str, bool, Optional[list[str]]]]:
        """(class name, is a Catalyst Command, name parts of a table/namespace or None)
        for every node of ``plan``: children, inner children, subqueries, script
        statements. One JVM call with the plan walker."""
        if self.walker is not None:
            out = []
            for line in str(self.walker.census(plan)).splitlines():
                cname, flag, ident = line.split("\t")
                parts = [unquote_plus(p) for p in ident.split(".")] if ident else None
                out.append((cname, flag == "C", parts))
            return out
        return [(cname, is_cmd, parts) for cname, is_cmd, parts, _ in self._py_census(plan)]

    def _py_census(self, plan: Any) -> Iterable[tuple[str, bool, Optional[list[str]], Any]]:
        """:meth:`census` walked from Python (no JDK to compile the walker), with nodes."""
        cname = str(plan.getClass().getSimpleName()).rstrip("$")
        if cname == "SingleStatement":
            yield from self._py_census(plan.parsedPlan())
            return
        parts = self._ident(plan) if cname in TABLE_NAMES | {"UnresolvedNamespace"} else None
        yield cname, self.jvm.is_command(plan), parts or None, plan
        for child in self.jvm.items(plan.children()):
            yield from self._py_census(child)
        for child in self.jvm.items(plan.innerChildren()):
            if self.jvm.is_logical_plan(child):
                yield from self._py_census(child)
        for child in self.jvm.items(plan.subqueries()):
            yield from self._py_census(child)

    def _statements(self, parsed: Any) -> list[tuple[str, Any]]:
        """The statements Spark runs for ``parsed``: the root, or each one below a
        multi-insert's Union or a CTE's definitions. Queries yield nothing."""
        name = node_name(parsed)
        if name in STATEMENT_CONTAINERS:
            out = []
            for child in self.jvm.items(parsed.children()):
                out += self._statements(child)
            return out
        kind = nodes.kind_of(name)
        if kind in (NodeKind.QUERY, None) and not self.jvm.is_command(parsed):
            return []
        return [(name, parsed)]

    def _refuse_unplannable(self, census: list, statements: list[tuple[str, Any]]) -> None:
        """Writes zklock never locks, and statements nested where it cannot plan them."""
        for cname, _, _ in census:
            kind = nodes.kind_of(cname)
            if kind is NodeKind.REFUSED:
                raise UnsupportedStatement(
                    f"zklock does not lock {cname}: streaming sinks, pipelines, stored"
                    " procedures and external commands are not locked; the statement was"
                    " not run")
            if kind in (NodeKind.EXECUTE, NodeKind.SCRIPT):
                raise UnsupportedStatement(
                    f"zklock cannot lock {cname} nested inside another statement; run it as a"
                    " statement of its own")
        found = {n for n, _ in statements}
        for cname, _, _ in census:
            kind = nodes.kind_of(cname)
            if kind in (NodeKind.TABLE_X, NodeKind.DATABASE_X, NodeKind.STATEMENT) \
                    and cname not in found:
                raise UnsupportedStatement(
                    f"zklock found {cname} nested where Spark may run it and zklock does not"
                    " plan it; the statement was not run")

    @staticmethod
    def _unknown(census: list, statements: list[tuple[str, Any]]) -> list[str]:
        """Commands and writes in the plan that zklock has no lock rule for."""
        names = {n for n, is_cmd, _ in census if nodes.is_unknown_write(n, is_cmd)}
        names |= {n for n, _ in statements if nodes.kind_of(n) is None}
        return sorted(names)

    def _conservative(self, parsed: Any, census: list, unknown: list[str],
                      text: Optional[str]) -> LockPlan:
        """Refuse a statement with unknown commands, or (policy ``lock``) take X on every
        table and database it names."""
        name = node_name(parsed)
        if self.unknown_statements != "lock":
            raise UnsupportedStatement(
                f"zklock has no lock rule for {', '.join(unknown)}, so the statement was not"
                " run; SET zklock.unknown.statements=lock (spark.zklock.unknown.statements)"
                " to lock every table it names in X instead")
        specs = [(obj, X) for obj in self._named_objects(census)]
        log.warning("zklock: no lock rule for %s; taking X on %s", ", ".join(unknown),
                    [o.name for o, _ in specs])
        return LockPlan(name, normalize(specs), True, parsed, None, text=text,
                        notes=[f"no lock rule for {', '.join(unknown)}: X on every object"
                               " it names (unknown_statements=lock)"])

    def _named_objects(self, census: list) -> list[LockObject]:
        """Every table (and database) a plan names, from its census."""
        out = []
        for cname, _, parts in census:
            if not parts:
                continue
            if cname == "UnresolvedNamespace":
                out.append(LockObject(parts[-1]))
                continue
            obj = self.table_object(parts)
            if obj is not None:
                out.append(obj)
        return out

    def _named_reads(self, census: list) -> list[tuple[LockObject, Mode]]:
        """S on every table a plan names and on each of its existing partitions: the reads
        of a statement that cannot be analyzed before it runs (locks more, never less)."""
        out: list[tuple[LockObject, Mode]] = []
        for cname, _, parts in census:
            if cname != "UnresolvedRelation" or not parts:
                continue
            obj = self.table_object(parts)
            if obj is None:
                continue
            out.append((obj, S))
            out += [(p, S) for p in self._existing_partitions(obj)]
        return out

    def _existing_partitions(self, table: LockObject) -> list[LockObject]:
        try:
            meta = self.jvm.table_metadata(table.db, table.table or "")
            cols = [c for c, _ in self.jvm.partition_schema(meta)]
            names = self.jvm.partition_names(meta) if cols else []
        except Exception:  # no such table (yet): the table-level lock is all there is
            return []
        return _expand(table, cols, {}, lambda: names)

    # ---- EXECUTE IMMEDIATE and SQL scripts -----------------------------------------
    def _plan_execute_immediate(self, parsed: Any, text: Optional[str],
                                in_script: bool) -> LockPlan:
        """The locks of the statement EXECUTE IMMEDIATE runs, planned like any statement.

        Its text may be a literal, a session variable or an expression over them: it is
        evaluated now. Inside a script (whose variables do not exist before it runs) only a
        literal can be known; anything else is refused.
        """
        expr = parsed.sqlStmtStr()
        if str(expr.nodeName()) == "Literal":
            inner = str(expr.value().toString()) if expr.value() is not None else None
        elif in_script:
            raise UnsupportedStatement(
                "zklock cannot know the statement EXECUTE IMMEDIATE runs inside a SQL script"
                f" ({expr.sql()}) before the script runs; use a string literal")
        elif expr.containsPattern(self.jvm.plan_expression):
            raise UnsupportedStatement(
                "zklock evaluates EXECUTE IMMEDIATE's text before running it, and this text"
                " reads tables (a subquery); use a literal or a session variable")
        else:
            inner = self._evaluate_text(str(expr.sql()))
        if inner is None:
            raise UnsupportedStatement("EXECUTE IMMEDIATE of a NULL statement text")
        sub = self.plan_parsed(self.jvm.parse(inner), strict=False)
        return LockPlan("UnresolvedExecuteImmediate", sub.targets, True, parsed, None,
                        notes=sub.notes + [f"EXECUTE IMMEDIATE runs: {inner[:200]}"], text=text)

    def _evaluate_text(self, expr_sql: str) -> Optional[str]:
        """Evaluate a statement-text expression (variables, concatenation) now."""
        try:
            plan = self.jvm.parse(f"SELECT CAST(({expr_sql}) AS STRING)")
        except Exception as exc:
            raise UnsupportedStatement(f"zklock cannot evaluate the text of EXECUTE IMMEDIATE"
                                       f" ({expr_sql}): {_first_line(exc)}") from None
        if any(nodes.kind_of(c) is not NodeKind.QUERY or p for c, _, p in self.census(plan)):
            raise UnsupportedStatement(f"zklock evaluates EXECUTE IMMEDIATE's text before"
                                       f" running it, and ({expr_sql}) reads tables; use a"
                                       " literal or a session variable")
        try:
            rows = self.jvm.run(self.jvm.analyze(plan)).collect()
        except Exception as exc:
            raise UnsupportedStatement(f"zklock cannot evaluate the text of EXECUTE IMMEDIATE"
                                       f" ({expr_sql}): {_first_line(exc)}") from None
        return rows[0][0]

    def _plan_script(self, parsed: Any, text: Optional[str]) -> LockPlan:
        """A SQL script (``BEGIN ... END``): the union of every statement's locks, held for
        the whole script (see docs/spark.md for why), plus S on every table it names."""
        specs: list[tuple[LockObject, Mode]] = []
        notes = []
        census = self.census(parsed)
        for cname, _, _ in census:
            if nodes.kind_of(cname) is NodeKind.REFUSED:
                raise UnsupportedStatement(f"zklock does not lock {cname}; the script was"
                                           " not run")
        for stmt in self._script_statements(parsed):
            sname = node_name(stmt)
            if sname == "UnresolvedExecuteImmediate":
                sub = self._plan_execute_immediate(stmt, None, in_script=True)
            elif sname == "CompoundBody":
                continue  # its statements are listed on their own
            else:
                sub = self.plan_parsed(stmt, strict=False)
            specs += [(t.obj, t.mode) for t in sub.targets]
            notes += sub.notes
        specs += self._named_reads(census)
        return LockPlan("CompoundBody", normalize(specs), True, parsed, None, text=text,
                        notes=sorted(set(notes)))

    def _script_statements(self, plan: Any) -> list[Any]:
        """The parsed plan of every statement of a script, however deeply nested."""
        out = []
        for _, _, _, node in self._py_script_nodes(plan):
            out.append(node)
        return out

    def _py_script_nodes(self, plan: Any) -> Iterable[tuple[str, bool, None, Any]]:
        cname = str(plan.getClass().getSimpleName()).rstrip("$")
        if cname == "SingleStatement":
            yield cname, False, None, plan.parsedPlan()
            return
        for child in self.jvm.items(plan.children()):
            yield from self._py_script_nodes(child)

    def plan_dataframe(self, df: Any) -> list[LockTarget]:
        """S locks for an action on ``df`` (its analyzed plan is cached by Spark)."""
        if self.walker is not None:
            return normalize(self._reads_in_jvm(None, True, False, dataframe=df._jdf))
        return normalize(self.reads(df._jdf.queryExecution().analyzed(), command=False))

    def plan_table_write(self, name: str, df: Any = None,
                         partition: Optional[dict[str, Any]] = None) -> list[LockTarget]:
        """X on a write target table (or its static partition prefix), S on ``df``'s sources."""
        parts = [p for p in self._split_name(name)]
        obj = self.table_object(parts)
        specs: list[tuple[LockObject, Mode]] = []
        if obj is not None:
            specs.append((self.static_prefix(obj, partition or {}), X))
        if df is not None:
            specs += self.reads(df._jdf.queryExecution().analyzed(), command=False)
        return normalize(specs)

    def tables_at(self, path: str) -> list[LockObject]:
        """Catalog tables a write to ``path`` touches: those whose location is ``path``,
        below it (overwriting a parent directory replaces them), or above it (a file
        written inside a table's directory is a write to that table)."""
        target = self.jvm.qualify(path).rstrip("/")
        out = []
        for db, table, location in self.jvm.table_locations():
            location = location.rstrip("/")
            if (target == location or target.startswith(location + "/")
                    or location.startswith(target + "/")):
                out.append(LockObject(db, table))
        return out

    # ---- writes: from the parsed plan ------------------------------------------
    def _writes(self, name: str, parsed: Any, is_command: bool) -> list[tuple[LockObject, Mode]]:
        if name == "InsertIntoStatement":
            obj = self.table_object(self._ident(parsed.table()))
            if obj is None:
                return []
            spec = {k: option_text(v) for k, v in self.jvm.mapping(parsed.partitionSpec()).items()}
            return [(self.static_prefix(obj, spec), X)]
        if name in nodes.DATABASE_X:
            parts = self._ident(parsed.children().apply(0))
            return [(LockObject(parts[-1]), X)] if parts else []
        if name == "RenameTable":
            old = self.table_object(self._ident(parsed.children().apply(0)))
            new_parts = self.jvm.strings(parsed.newName())
            if len(new_parts) == 1 and old is not None:  # Spark renames within the old database
                new_parts = [old.db] + new_parts
            new = self.table_object(new_parts)
            return [(o, X) for o in (old, new) if o is not None]
        if name in ("DeleteFromTable", "UpdateTable"):
            return self._on_table(parsed.table(), X)
        if name == "MergeIntoTable":
            return self._on_table(parsed.targetTable(), X)
        if name == "InsertIntoDir":
            location = self.jvm.option(parsed.storage().locationUri())
            if location is None:
                return []
            return [(obj, X) for obj in self.tables_at(str(location.toString()))]
        if name in ("AddPartitions", "DropPartitions"):
            return self._on_partitions(parsed, self.jvm.items(parsed.parts()), X)
        if name == "RenamePartitions":
            return self._on_partitions(parsed, [getattr(parsed, "from")(), parsed.to()], X)
        if name == "TruncatePartition":
            return self._on_partitions(parsed, [parsed.partitionSpec()], X)
        if name in ("LoadData", "SetTableLocation"):
            spec = self.jvm.option(parsed.partition() if name == "LoadData"
                                   else parsed.partitionSpec())
            return self._on_spec(parsed, spec, X)
        if name == "SetTableSerDeProperties":  # Hive's lock table: S on T1
            return self._on_spec(parsed, self.jvm.option(parsed.partitionSpec()), S)
        if name in ("AnalyzeTable", "AnalyzeColumn"):
            spec = {}
            if name == "AnalyzeTable":
                spec = {k: option_text(v)
                        for k, v in self.jvm.mapping(parsed.partitionSpec()).items()
                        if option_text(v) is not None}
            obj = self.table_object(self._ident(parsed.children().apply(0)))
            return [(self.static_prefix(obj, spec), S)] if obj is not None else []
        if name == "AnalyzeTables":
            parts = self._ident(parsed.children().apply(0))
            return [(LockObject(parts[-1]), S)] if parts else []
        if name in nodes.TABLE_X:
            return self._on_table(parsed.children().apply(0), X)
        if name in nodes.READS or name in nodes.NO_LOCKS:
            return []  # reads only: planned from the analyzed plan
        if not is_command:
            return []
        # _unknown() routes every other command to refusal or the conservative plan first
        raise UnsupportedStatement(f"zklock has no lock rule for {name}; the statement was"
                                   " not run")

    def _location_writes(self, name: str, parsed: Any) -> list[tuple[LockObject, Mode]]:
        """X on catalog tables whose files a statement's *location* touches: a table created
        or moved onto another's directory, or files LOAD DATA moves out of one."""
        if name in ("CreateTable", "CreateTableAsSelect", "ReplaceTable",
                    "ReplaceTableAsSelect"):
            location = self.jvm.option(parsed.tableSpec().location())
        elif name == "SetTableLocation":
            location = parsed.location()
        elif name == "LoadData" and not parsed.isLocal():
            location = parsed.path()
        else:
            return []
        if location is None:
            return []
        return [(obj, X) for obj in self.tables_at(str(location))]

    def _insert_in_jvm(self, analyzed: Any) -> Optional[list[tuple[LockObject, Mode]]]:
        """X for a file-source INSERT, read off the analyzed command in one call (else None)."""
        text = str(self.walker.insertTarget(analyzed))
        if not text:
            return None
        qualified, cols_text, spec_text = (unquote_plus(x) if i == 0 else x
                                           for i, x in enumerate(text.split("\t")))
        parts = qualified.split(".")
        table = LockObject(parts[-2] if len(parts) >= 2 else self.jvm.current_database(),
                           parts[-1])
        spec = {}
        for item in filter(None, spec_text.split(",")):
            key, _, value = item.partition("=")
            spec[unquote_plus(key).lower()] = unquote_plus(value)
        prefix = []
        for item in filter(None, cols_text.split(",")):
            col, _, typ = (unquote_plus(x) for x in item.partition(":"))
            if col.lower() not in spec:
                break
            prefix.append((col, _normalize_value(spec[col.lower()], typ)))
        return [(LockObject(table.db, table.table, tuple(prefix)), X)]

    def _on_table(self, node: Any, mode: Mode) -> list[tuple[LockObject, Mode]]:
        if str(node.nodeName()) == "PlanWithUnresolvedIdentifier":
            raise InvalidArguments("zklock cannot tell which table IDENTIFIER(<expression>)"
                                   " names before the statement runs; name it literally")
        obj = self.table_object(self._ident(node))
        return [(obj, mode)] if obj is not None else []

    def _on_partitions(self, parsed: Any, specs: Iterable[Any], mode: Mode
                       ) -> list[tuple[LockObject, Mode]]:
        obj = self.table_object(self._ident(parsed.children().apply(0)))
        if obj is None:
            return []
        out = []
        for spec in specs:
            if str(spec.nodeName()) != "UnresolvedPartitionSpec":
                return [(obj, mode)]
            out.append((self.static_prefix(obj, self.jvm.mapping(spec.spec())), mode))
        return out

    def _on_spec(self, parsed: Any, spec: Any, mode: Mode) -> list[tuple[LockObject, Mode]]:
        obj = self.table_object(self._ident(parsed.children().apply(0)))
        if obj is None:
            return []
        return [(self.static_prefix(obj, self.jvm.mapping(spec) if spec is not None else {}),
                 mode)]

    def static_prefix(self, table: LockObject, spec: dict[str, Any]) -> LockObject:
        """The table, or its partition given by the leading static values of ``spec``.

        Columns after the first dynamic (or missing) one are ignored: the
        conservative rule Hive's design gives for dynamic partitions.
        """
        if not spec:
            return table
        values = {str(k).lower(): v for k, v in spec.items()}
        try:
            meta = self.jvm.table_metadata(table.db, table.table or "")
            columns = self.jvm.partition_schema(meta)
        except Exception:  # no such table (CREATE, or Spark will raise its own error)
            return table
        prefix = []
        for col, typ in columns:
            value = values.get(col.lower())
            if value is None:
                break
            prefix.append((col, _normalize_value(str(value), typ)))
        return LockObject(table.db, table.table, tuple(prefix))

    # ---- reads: from the analyzed plan -----------------------------------------
    def reads(self, analyzed: Any, partitions: bool = True,
              command: bool = True) -> list[tuple[LockObject, Mode]]:
        """S on every permanent view, table and scanned partition ``analyzed`` reads."""
        if self.walker is not None:
            return self._reads_in_jvm(analyzed, partitions, command)
        out: list[tuple[LockObject, Mode]] = []
        inner = bool(analyzed.containsPattern(self.jvm.plan_expression))
        # commands keep their query in innerChildren (CTAS, CREATE VIEW, CACHE TABLE)
        self._walk(analyzed, [], out, partitions, inner, root=command)
        return out

    def _walk(self, node: Any, conditions: list[Any], out: list, partitions: bool,
              inner: bool, root: bool = False) -> None:
        name = str(node.nodeName())
        if name in ("LogicalRelation", "HiveTableRelation"):
            rel = self._relation(node, name)
            if rel is not None:
                out.append((rel.obj, S))
                if partitions and rel.partition_cols:
                    out += [(p, S) for p in self._scanned(rel, conditions)]
            return
        if name in ("DataSourceV2Relation", "DataSourceV2ScanRelation"):
            ident = self.jvm.option(node.identifier())
            if ident is not None:
                parts = [str(p) for p in ident.namespace()] + [str(ident.name())]
                obj = self.table_object(parts)
                if obj is not None:
                    out.append((obj, S))
            return
        if name == "View" and not node.isTempView():
            ident = node.desc().identifier()
            db = self.jvm.option(ident.database())
            out.append((LockObject(str(db or self.jvm.current_database()), str(ident.table())),
                        S))
        if name == "Filter":
            conditions = conditions + [node.condition()]
        elif name == "Join" and str(node.joinType().toString()) == "Inner":
            cond = self.jvm.option(node.condition())
            if cond is not None:
                conditions = conditions + [cond]
        elif name not in FILTER_TRANSPARENT:
            conditions = []
        if name in UNARY:
            self._walk(node.child(), conditions, out, partitions, inner)
        elif name not in LEAVES:
            kids = node.children()
            for i in range(kids.size()):
                self._walk(kids.apply(i), conditions, out, partitions, inner)
        if inner or (root and name not in UNARY):
            extra = node.innerChildren()
            for i in range(extra.size()):
                child = extra.apply(i)
                if self.jvm.is_logical_plan(child):
                    self._walk(child, [], out, partitions, inner)

    def _relation(self, node: Any, name: str) -> Optional[_Relation]:
        table = (node.tableMeta() if name == "HiveTableRelation"
                 else self.jvm.option(node.catalogTable()))
        if table is None:
            return None  # a path, not a catalog table: nothing to lock
        parts = str(table.qualifiedName()).split(".")
        db = parts[-2] if len(parts) >= 2 else self.jvm.current_database()
        obj = LockObject(db, parts[-1])
        return _Relation(obj, table, node, self.jvm.partition_schema(table))

    def column_pins(self, table: str, condition: Any) -> dict[str, str]:
        """Partition columns that ``condition`` (a Column) pins to one value on ``table``."""
        analyzed = self.jvm.spark.table(table).where(condition)._jdf.queryExecution().analyzed()
        conditions: list[Any] = []
        node = analyzed
        while True:
            name = str(node.nodeName())
            if name == "Filter":
                conditions.append(node.condition())
            elif name in ("LogicalRelation", "HiveTableRelation"):
                rel = self._relation(node, name)
                if rel is None:
                    return {}
                pins = self._pins(rel, conditions)
                return {c: next(iter(v)) for c, v in pins.items() if len(v) == 1}
            elif name not in FILTER_TRANSPARENT or node.children().size() != 1:
                return {}
            node = node.children().apply(0)

    def _pins(self, rel: _Relation, conditions: list[Any]) -> dict[str, set[str]]:
        ids = {}
        wanted = {c.lower() for c, _ in rel.partition_cols}
        if not conditions:
            return {}
        for text in self.jvm.strings(rel.node.output()):
            attr, _, rest = text.rpartition("#")
            digits = "".join(itertools.takewhile(str.isdigit, rest))
            if attr.lower() in wanted and digits:
                ids[int(digits)] = attr.lower()
        pins: dict[str, set[str]] = {}
        for cond in conditions:
            for conj in _conjuncts(cond):
                got = self._pin(conj, ids)
                if got is None:
                    continue
                col, values = got
                pins[col] = pins[col] & values if col in pins else values
        types = {c.lower(): t for c, t in rel.partition_cols}
        return {c: {_normalize_value(v, types[c]) for v in vs} for c, vs in pins.items()}

    def _scanned(self, rel: _Relation, conditions: list[Any]) -> list[LockObject]:
        """The partitions a scan of ``rel`` under ``conditions`` reads."""
        return _expand(rel.obj, [c for c, _ in rel.partition_cols], self._pins(rel, conditions),
                       lambda: self.jvm.partition_names(rel.catalog_table))

    def _reads_in_jvm(self, analyzed: Any, partitions: bool, command: bool,
                      dataframe: Any = None) -> list[tuple[LockObject, Mode]]:
        """:meth:`reads` through PlanWalker.java: one py4j call (plus listings it did)."""
        out: list[tuple[LockObject, Mode]] = []
        text = (self.walker.dataFrameLocks(dataframe) if dataframe is not None
                else self.walker.locks(analyzed, partitions, command))
        for item in walker.parse(str(text)):
            if item[0] == "V":
                out.append((LockObject(item[1] or self.jvm.current_database(), item[2]), S))
                continue
            if item[0] == "T":
                obj = self.table_object([p for p in item[1].split(".") if p] + [item[2]])
                if obj is not None:
                    out.append((obj, S))
                continue
            _, qualified, cols, raw_pins, listed = item
            parts = qualified.split(".")
            obj = LockObject(parts[-2] if len(parts) >= 2 else self.jvm.current_database(),
                             parts[-1])
            out.append((obj, S))
            if not partitions or not cols:
                continue
            types = {c.lower(): t for c, t in cols}
            pins: dict[str, set[str]] = {}
            for col, literals in raw_pins:
                values = {literal_value(text) for text in literals}
                if None in values or col not in types:
                    continue
                norm = {_normalize_value(v, types[col]) for v in values if v is not None}
                pins[col] = pins[col] & norm if col in pins else norm
            if listed is None:
                def fetch(obj: LockObject = obj) -> list[str]:
                    return self.jvm.partition_names(
                        self.jvm.table_metadata(obj.db, obj.table or ""))
            else:
                def fetch(listed: list[str] = listed) -> list[str]:
                    return listed
            out += [(p, S) for p in _expand(obj, [c for c, _ in cols], pins, fetch)]
        return out

    @staticmethod
    def _pin(expr: Any, ids: dict[int, str]) -> Optional[tuple[str, set[str]]]:
        """``col = literal`` or ``col IN (literals)`` on a partition column, else None."""
        name = str(expr.nodeName())
        if name in ("EqualTo", "EqualNullSafe"):
            left, right = expr.left(), expr.right()
            if str(left.nodeName()) == "Literal":
                left, right = right, left
            col = _attribute(left, ids)
            value = _literal(right)
            return (col, {value}) if col is not None and value is not None else None
        if name == "In":
            col = _attribute(expr.value(), ids)
            if col is None:
                return None
            values = set()
            items = expr.list()
            for i in range(items.size()):
                v = _literal(items.apply(i))
                if v is None:
                    return None
                values.add(v)
            return col, values
        return None

    # ---- names ----------------------------------------------------------------
    def _ident(self, node: Any) -> list[str]:
        name = str(node.nodeName())
        if name in ("UnresolvedTable", "UnresolvedTableOrView", "UnresolvedView",
                    "UnresolvedRelation", "UnresolvedNamespace"):
            return self.jvm.strings(node.multipartIdentifier())
        if name == "UnresolvedIdentifier":
            return self.jvm.strings(node.nameParts())
        if name == "SubqueryAlias":
            return self._ident(node.child())
        if name.startswith("CurrentNamespace"):
            return [self.jvm.current_database()]
        return []

    def table_object(self, parts: list[str]) -> Optional[LockObject]:
        """A table's LockObject from its name parts; None for temp views and non-tables.

        The catalog part of a three-part name is dropped: all catalogs share
        one lock namespace, which can only add conflicts, never lose one.
        """
        if not parts:
            return None
        if len(parts) == 1:
            if self.jvm.is_temp_view(parts[0]):
                return None
            return LockObject(self.jvm.current_database(), parts[0])
        return LockObject(parts[-2], parts[-1])

    def validate(self, statement: str) -> None:
        """Raise Spark's ParseException when ``statement`` does not parse."""
        self.jvm.parse(statement)

    def _split_name(self, name: str) -> list[str]:
        return self.jvm.strings(self.jvm.parser.parseMultipartIdentifier(name))


def node_name(plan: Any) -> str:
    """A plan node's class name as zklock's tables write it (a case object loses its ``$``)."""
    return str(plan.nodeName()).rstrip("$")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _conjuncts(expr: Any) -> list[Any]:
    if str(expr.nodeName()) == "And":
        return _conjuncts(expr.left()) + _conjuncts(expr.right())
    return [expr]


def _attribute(expr: Any, ids: dict[int, str]) -> Optional[str]:
    if str(expr.nodeName()) != "AttributeReference":
        return None
    digits = "".join(itertools.takewhile(str.isdigit, str(expr.toString()).rpartition("#")[2]))
    return ids.get(int(digits)) if digits else None


def _literal(expr: Any) -> Optional[str]:
    """A string or integral literal's value, from its SQL form (one py4j call)."""
    if str(expr.nodeName()) != "Literal":
        return None
    return literal_value(str(expr.sql()))


def literal_value(sql: str) -> Optional[str]:
    """``'a\\'b'`` -> ``a'b``, ``12``/``12L``/``12S``/``12Y`` -> ``12``; else None."""
    if len(sql) >= 2 and sql[0] == "'" and sql[-1] == "'":
        body, out, i = sql[1:-1], [], 0
        while i < len(body):
            if body[i] == "\\" and i + 1 < len(body):
                out.append(body[i + 1])
                i += 2
            else:
                out.append(body[i])
                i += 1
        return "".join(out)
    digits = sql[:-1] if sql[-1:] in ("L", "S", "Y") else sql
    if digits.lstrip("-").isascii() and digits.lstrip("-").isdigit():
        return str(int(digits))
    return None


def _normalize_value(value: str, typ: str) -> str:
    """A partition value as Spark stores it: ``hr='01'`` on an int column is ``hr=1``."""
    if typ in _INTEGRAL:
        try:
            return str(int(value.strip()))
        except ValueError:
            return value
    return value


def _expand(table: LockObject, cols: list[str], pins: dict[str, set[str]],
            listing: Any) -> list[LockObject]:
    """Partitions to lock: every pinned combination, else existing ones matching the pins."""
    if all(c.lower() in pins for c in cols):
        combos = 1
        for c in cols:
            combos *= len(pins[c.lower()])
        if combos <= MAX_PINNED:
            return [LockObject(table.db, table.table, tuple(zip(cols, values)))
                    for values in itertools.product(*(sorted(pins[c.lower()]) for c in cols))]
    out = []
    for pname in listing():
        spec = [tuple(unescape_path_name(x) for x in comp.split("=", 1))
                for comp in pname.split("/")]
        if all(v in pins[k.lower()] for k, v in spec if k.lower() in pins):
            out.append(LockObject(table.db, table.table, tuple(spec)))
    return out
