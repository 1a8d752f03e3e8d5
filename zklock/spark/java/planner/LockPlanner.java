// zklock's lock planner: the S and X locks a Spark statement or DataFrame needs, from Spark's
// own plans. Hive's lock table, applied to Catalyst instead of Hive's compiler:
//
// * what a statement writes comes from the parsed plan, whose command nodes (InsertIntoStatement,
//   AddPartitions, DropTable ...) are the same whatever table format is behind them;
// * what it reads comes from the analyzed plan (PlanWalker.java), where views are expanded to
//   their base tables and CTEs, subqueries, joins and unions are all visible;
// * a dynamic-partition insert takes X on the table, or on its static prefix.
//
// It is the one planner: a classic session calls it through py4j (zklock/spark/planner.py),
// a Spark Connect client through ConnectLockPlugin.java. Every entry point answers with a
// LockAnswer (the locks, or a refusal); Spark's own errors are thrown as Spark throws them.
// What each plan node class means is NodeKinds.java.
package zklock;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.spark.sql.catalyst.analysis.UnresolvedPartitionSpec;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.ExternalCatalog;
import org.apache.spark.sql.catalyst.catalog.SessionCatalog;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.trees.TreePattern$;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.CommandExecutionMode;

import zklock.LockAnswer.Refusal;
import zklock.LockAnswer.Target;
import zklock.NodeKinds.Kind;

public final class LockPlanner {
    /** Statements that define a view: their sources are locked at table level only. */
    private static final Set<String> VIEW_DDL = Set.of("CreateView", "AlterViewAs");
    /** Parsed roots of plain queries (SELECT ...): commands only if one is nested in them. */
    private static final Set<String> KNOWN_QUERIES = Set.of(
        "Project", "Aggregate", "Filter", "Sort", "GlobalLimit", "LocalLimit", "Union",
        "Distinct", "Join", "Window", "Intersect", "Except", "Offset", "Tail", "UnresolvedHint");
    /** Parsed nodes through which a nested statement is still run by Spark: a multi-insert is
     *  a Union of inserts, and WITH ... INSERT puts the insert below the CTE definitions. */
    private static final Set<String> STATEMENT_CONTAINERS = Set.of("Union", "UnresolvedWith");

    private final SparkSession session;
    private final SessionCatalog catalog;
    private final PlanWalker walker;
    private volatile String unknownStatements;

    /** A planner on {@code session}; {@code unknownStatements} is "refuse" or "lock". */
    public LockPlanner(SparkSession session, String unknownStatements) {
        this.session = session;
        this.catalog = session.sessionState().catalog();
        this.walker = new PlanWalker(catalog);
        setUnknownStatements(unknownStatements);
    }

    /** What a command without a lock rule gets: "refuse" (the default) or "lock" (X on every
     *  object it names). */
    public void setUnknownStatements(String policy) {
        String p = policy == null ? "refuse" : policy;
        if (!p.equals("refuse") && !p.equals("lock")) {
            throw new IllegalArgumentException("unknown_statements is refuse or lock, not " + p);
        }
        this.unknownStatements = p;
    }

    // ---- entry points ------------------------------------------------------------------------

    /** The answer for {@code sql}: EXPLAIN LOCKS, and Spark Connect's plugin. */
    public String planSql(String sql, boolean strict) {
        try {
            return answer(planParsed(parse(sql), strict));
        } catch (Refusal r) {
            return LockAnswer.refused(r).toJson();
        }
    }

    /** The answer for a plan not analyzed yet: the plan Spark Connect builds from a relation. */
    public String planPlan(LogicalPlan plan, boolean strict) {
        try {
            return answer(planParsed(plan, strict));
        } catch (Refusal r) {
            return LockAnswer.refused(r).toJson();
        }
    }

    /** The answer for a command Spark is about to execute (zklock's engine extension): its
     *  parsed form and the analysis Spark made of it, so that it is not analyzed twice. */
    String planCommand(LogicalPlan parsed, LogicalPlan analyzed) {
        try {
            return answer(planParsed(parsed, true, analyzed));
        } catch (Refusal r) {
            return LockAnswer.refused(r).toJson();
        }
    }

    /** S on what an action on {@code ds} reads (Spark caches its analyzed plan). */
    public String planDataFrame(org.apache.spark.sql.Dataset<?> ds) {
        return planQuery(ds.queryExecution().analyzed());
    }

    /** S on what a query reads, from its analyzed plan (views expanded, subqueries and CTEs
     *  visible): what zklock's engine takes before Spark executes it. */
    String planQuery(LogicalPlan analyzed) {
        try {
            return LockAnswer.locks(false, walker.reads(analyzed, true, false), List.of(), false)
                .toJson();
        } catch (Refusal r) {
            return LockAnswer.refused(r).toJson();
        }
    }

    /**
     * The object a write to {@code table} locks in X: the table, or its static
     * {@code partition} prefix (may be null); no targets for a temporary view. zklock's own
     * statements (LOCK TABLE, leases) name their objects with it.
     */
    public String planWrite(String table, Map<String, String> partition) {
        try {
            List<Target> specs = new ArrayList<>();
            Target target = tableTarget(nameParts(table), "X");
            if (target != null) {
                specs.add(staticPrefix(target, partition == null ? new HashMap<>() : partition));
            }
            return LockAnswer.locks(true, specs, new ArrayList<>(), false).toJson();
        } catch (Refusal r) {
            return LockAnswer.refused(r).toJson();
        }
    }

    /** X on every catalog table stored at, above or below each of {@code paths}: a write
     *  there writes those tables (Spark 4.0's saveAsTable with a path option, locked whole by
     *  its LockingSession). */
    public String planPaths(List<String> paths) {
        try {
            List<Target> specs = new ArrayList<>();
            for (String path : paths) {
                specs.addAll(tablesAt(path));
            }
            return LockAnswer.locks(true, specs, new ArrayList<>(), false).toJson();
        } catch (Refusal r) {
            return LockAnswer.refused(r).toJson();
        }
    }

    /** Spark's ParseException when {@code sql} does not parse. */
    public void validate(String sql) {
        parse(sql);
    }

    private static String answer(Plan plan) {
        return plan.answer().toJson();
    }

    // ---- one statement ----------------------------------------------------------------------

    /** A statement's locks, whether Spark runs it as a command (eagerly, in sql()) and what
     *  the planner noted. */
    private static final class Plan {
        final List<Target> targets;
        final boolean command;
        final List<String> notes;
        boolean recheck;  // planned on what exists now: plan again once the locks are held
        boolean whole;    // a script: its caller holds the locks around all of it

        Plan(List<Target> targets, boolean command, List<String> notes) {
            this.targets = targets;
            this.command = command;
            this.notes = notes;
        }

        LockAnswer answer() {
            return LockAnswer.locks(command, targets, notes, recheck, whole);
        }
    }

    private Plan command(List<Target> targets, List<String> notes) {
        return new Plan(targets, true, notes);
    }

    private Plan planParsed(LogicalPlan parsed, boolean strict) {
        return planParsed(parsed, strict, null);
    }

    /** ... with {@code analyzedAlready}, Spark's analysis of {@code parsed} when it has one. */
    private Plan planParsed(LogicalPlan parsed, boolean strict, LogicalPlan analyzedAlready) {
        String name = PlanWalker.nodeName(parsed);
        if (NodeKinds.is(name, Kind.NO_LOCKS)) {
            return new Plan(new ArrayList<>(), true, new ArrayList<>());
        }
        if (name.equals("PlanWithUnresolvedIdentifier")) {
            throw LockAnswer.invalidArguments("zklock cannot tell which object"
                + " IDENTIFIER(<expression>) names before the statement runs; name it literally");
        }
        if (name.equals(ExecuteImmediate.NODE)) {
            return planExecuteImmediate(parsed, false);
        }
        if (name.equals("CompoundBody")) {
            return planScript(parsed);
        }
        List<PlanWalker.Node> census = PlanWalker.census(parsed);
        List<Statement> statements = statements(parsed);
        refuseUnplannable(census, statements);
        List<String> unknown = unknown(census, statements);
        if (!unknown.isEmpty()) {
            return conservative(census, unknown);
        }
        LogicalPlan analyzed = analyzedAlready;
        try {
            if (analyzed == null) {
                analyzed = session.sessionState().executePlan(parsed, CommandExecutionMode.SKIP())
                    .analyzed();
            }
        } catch (Exception e) {
            if (strict) {
                throw sneaky(e);
            }
            List<Target> specs = new ArrayList<>();
            for (Statement s : statements) {
                specs.addAll(writes(s.name, s.node));
                specs.addAll(locationWrites(s.name, s.node));
            }
            specs.addAll(namedReads(census));
            List<String> notes = new ArrayList<>();
            notes.add("Spark's analyzer rejects this statement: " + firstLine(e));
            return command(specs, notes);
        }
        unknown = unknown(PlanWalker.census(analyzed), new ArrayList<>());
        if (!unknown.isEmpty()) {
            return conservative(census, unknown);
        }
        boolean isCommand;
        if (!statements.isEmpty()) {
            isCommand = true;
        } else if (KNOWN_QUERIES.contains(name)) {
            isCommand = false;
        } else {
            isCommand = analyzed instanceof Command;
        }
        List<Target> specs = new ArrayList<>();
        for (Statement s : statements) {
            Target insert = s.node == parsed && s.name.equals("InsertIntoStatement")
                ? insertTarget(analyzed) : null;
            if (insert != null) {
                specs.add(insert);
            } else {
                specs.addAll(writes(s.name, s.node));
            }
            specs.addAll(locationWrites(s.name, s.node));
        }
        specs.addAll(pathInserts(analyzed));
        specs.addAll(walker.reads(analyzed, !VIEW_DDL.contains(name), isCommand));
        Plan plan = new Plan(specs, isCommand, new ArrayList<>());
        for (Statement s : statements) {
            plan.recheck |= existingCreate(s.node);
        }
        return plan;
    }

    /** Spark's parser; its ParseException (declared by Scala) is thrown unchanged. */
    private LogicalPlan parse(String sql) {
        try {
            return session.sessionState().sqlParser().parsePlan(sql);
        } catch (Exception e) {
            throw sneaky(e);
        }
    }

    private List<String> nameParts(String name) {
        try {
            return PlanWalker.strings(
                session.sessionState().sqlParser().parseMultipartIdentifier(name));
        } catch (Exception e) {
            throw sneaky(e);
        }
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
        throw (E) e;  // rethrow Spark's own (Scala: undeclared checked) exception unchanged
    }

    /** X on the catalog tables whose files an insert into a path writes: a temporary view
     *  USING parquet OPTIONS (path '<a table's location>') is that table. */
    private List<Target> pathInserts(LogicalPlan analyzed) {
        List<Target> out = new ArrayList<>();
        List<LogicalPlan> pending = new ArrayList<>();
        pending.add(analyzed);
        while (!pending.isEmpty()) {
            LogicalPlan node = pending.remove(pending.size() - 1);
            if (node instanceof org.apache.spark.sql.execution.datasources
                    .InsertIntoHadoopFsRelationCommand) {
                org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand cmd =
                    (org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand)
                    node;
                if (cmd.catalogTable().isEmpty()) {
                    out.addAll(tablesAt(cmd.outputPath().toString()));
                }
                continue;
            }
            scala.collection.Seq<LogicalPlan> kids = node.children();
            for (int i = 0; i < kids.size(); i++) {
                pending.add(kids.apply(i));
            }
        }
        return out;
    }

    private static final class Statement {
        final String name;
        final LogicalPlan node;

        Statement(String name, LogicalPlan node) {
            this.name = name;
            this.node = node;
        }
    }

    /** The statements Spark runs for {@code parsed}: the root, or each one below a
     *  multi-insert's Union or a CTE's definitions. Queries yield nothing. */
    private List<Statement> statements(LogicalPlan parsed) {
        String name = PlanWalker.nodeName(parsed);
        List<Statement> out = new ArrayList<>();
        if (STATEMENT_CONTAINERS.contains(name)) {
            scala.collection.Seq<LogicalPlan> kids = parsed.children();
            for (int i = 0; i < kids.size(); i++) {
                out.addAll(statements(kids.apply(i)));
            }
            return out;
        }
        Kind kind = NodeKinds.kindOf(name);
        if ((kind == null || kind == Kind.QUERY) && !(parsed instanceof Command)) {
            return out;
        }
        out.add(new Statement(name, parsed));
        return out;
    }

    /** Writes zklock never locks, and statements nested where it cannot plan them. */
    private static void refuseUnplannable(List<PlanWalker.Node> census,
                                          List<Statement> statements) {
        for (PlanWalker.Node n : census) {
            Kind kind = NodeKinds.kindOf(n.name);
            if (kind == Kind.REFUSED) {
                throw LockAnswer.unsupported("zklock does not lock " + n.name + ": streaming"
                    + " sinks, pipelines, stored procedures and external commands are not"
                    + " locked; the statement was not run");
            }
            if (kind == Kind.EXECUTE || kind == Kind.SCRIPT) {
                throw LockAnswer.unsupported("zklock cannot lock " + n.name + " nested inside"
                    + " another statement; run it as a statement of its own");
            }
        }
        Set<String> found = new HashSet<>();
        for (Statement s : statements) {
            found.add(s.name);
        }
        for (PlanWalker.Node n : census) {
            Kind kind = NodeKinds.kindOf(n.name);
            if ((kind == Kind.TABLE_X || kind == Kind.DATABASE_X || kind == Kind.STATEMENT)
                    && !found.contains(n.name)) {
                throw LockAnswer.unsupported("zklock found " + n.name + " nested where Spark may"
                    + " run it and zklock does not plan it; the statement was not run");
            }
        }
    }

    /** Commands and writes in the plan that zklock has no lock rule for. */
    private static List<String> unknown(List<PlanWalker.Node> census,
                                        List<Statement> statements) {
        TreeSet<String> names = new TreeSet<>();
        for (PlanWalker.Node n : census) {
            if (NodeKinds.isUnknownWrite(n.name, n.command)) {
                names.add(n.name);
            }
        }
        for (Statement s : statements) {
            if (NodeKinds.kindOf(s.name) == null) {
                names.add(s.name);
            }
        }
        return new ArrayList<>(names);
    }

    /** Refuse a statement with unknown commands, or (policy "lock") take X on every table and
     *  database it names. */
    private Plan conservative(List<PlanWalker.Node> census, List<String> unknown) {
        String names = String.join(", ", unknown);
        if (!unknownStatements.equals("lock")) {
            throw LockAnswer.unsupported("zklock has no lock rule for " + names + ", so the"
                + " statement was not run; SET zklock.unknown.statements=lock"
                + " (spark.zklock.unknown.statements) to lock every table it names in X"
                + " instead");
        }
        List<Target> specs = new ArrayList<>();
        for (PlanWalker.Node n : census) {
            if (n.parts == null || n.parts.isEmpty()) {
                continue;
            }
            Target t = n.name.equals("UnresolvedNamespace")
                ? Target.database(last(n.parts), "X") : tableTarget(n.parts, "X");
            if (t != null) {
                specs.add(t);
            }
        }
        List<String> notes = new ArrayList<>();
        notes.add("no lock rule for " + names + ": X on every object it names"
            + " (unknown_statements=lock)");
        return command(specs, notes);
    }

    /** S on every table a plan names and on each of its existing partitions: the reads of a
     *  statement that cannot be analyzed before it runs (locks more, never less). */
    private List<Target> namedReads(List<PlanWalker.Node> census) {
        List<Target> out = new ArrayList<>();
        for (PlanWalker.Node n : census) {
            if (!n.name.equals("UnresolvedRelation") || n.parts == null || n.parts.isEmpty()) {
                continue;
            }
            Target table = tableTarget(n.parts, "S");
            if (table == null) {
                continue;
            }
            out.add(table);
            CatalogTable meta = tableMetadataOrNull(table);
            if (meta == null) {
                continue;  // no such table (yet): the table-level lock is all there is
            }
            List<String[]> columns = PlanWalker.partitionColumns(meta);
            if (!columns.isEmpty()) {
                for (List<String[]> spec : walker.partitionsToLock(meta, columns,
                        new HashMap<>())) {
                    out.add(new Target(table.db, table.table, spec, "S"));
                }
            }
        }
        return out;
    }

    // ---- EXECUTE IMMEDIATE and SQL scripts ------------------------------------------------

    /** The locks of the statement EXECUTE IMMEDIATE runs, planned like any statement. Its
     *  text may be a literal, a session variable or an expression over them: it is evaluated
     *  now. Inside a script (whose variables do not exist before it runs) only a literal can
     *  be known; anything else is refused. */
    private Plan planExecuteImmediate(LogicalPlan parsed, boolean inScript) {
        Expression expr = ExecuteImmediate.text(parsed);
        String inner;
        if (expr instanceof Literal) {
            Object value = ((Literal) expr).value();
            inner = value != null ? value.toString() : null;
        } else if (inScript) {
            throw LockAnswer.unsupported("zklock cannot know the statement EXECUTE IMMEDIATE"
                + " runs inside a SQL script (" + expr.sql() + ") before the script runs; use a"
                + " string literal");
        } else if (expr.containsPattern(TreePattern$.MODULE$.PLAN_EXPRESSION())) {
            throw LockAnswer.unsupported("zklock evaluates EXECUTE IMMEDIATE's text before"
                + " running it, and this text reads tables (a subquery); use a literal or a"
                + " session variable");
        } else {
            inner = evaluateText(expr.sql());
        }
        if (inner == null) {
            throw LockAnswer.unsupported("EXECUTE IMMEDIATE of a NULL statement text");
        }
        Plan sub = planParsed(parse(inner), false);
        List<String> notes = new ArrayList<>(sub.notes);
        notes.add("EXECUTE IMMEDIATE runs: " + (inner.length() > 200
            ? inner.substring(0, 200) : inner));
        return command(sub.targets, notes);
    }

    private String evaluateText(String exprSql) {
        LogicalPlan plan;
        try {
            plan = parse("SELECT CAST((" + exprSql + ") AS STRING)");
        } catch (Exception e) {
            throw LockAnswer.unsupported("zklock cannot evaluate the text of EXECUTE IMMEDIATE ("
                + exprSql + "): " + firstLine(e));
        }
        for (PlanWalker.Node n : PlanWalker.census(plan)) {
            if (NodeKinds.kindOf(n.name) != Kind.QUERY
                    || (n.parts != null && !n.parts.isEmpty())) {
                throw LockAnswer.unsupported("zklock evaluates EXECUTE IMMEDIATE's text before"
                    + " running it, and (" + exprSql + ") reads tables; use a literal or a"
                    + " session variable");
            }
        }
        try {
            LogicalPlan analyzed = session.sessionState()
                .executePlan(plan, CommandExecutionMode.SKIP()).analyzed();
            List<org.apache.spark.sql.Row> rows =
                Datasets.of(session, analyzed).collectAsList();
            Object value = rows.get(0).get(0);
            return value == null ? null : value.toString();
        } catch (Exception e) {
            throw LockAnswer.unsupported("zklock cannot evaluate the text of EXECUTE IMMEDIATE ("
                + exprSql + "): " + firstLine(e));
        }
    }

    /** A SQL script (BEGIN ... END): the union of every statement's locks, held for the whole
     *  script (Spark runs it in one call, with no hook between statements), plus S on every
     *  table it names. */
    private Plan planScript(LogicalPlan parsed) {
        if (!SqlScripts.SUPPORTED) {
            throw LockAnswer.unsupported("zklock locks SQL scripts from Spark 4.1 on (4.0's are"
                + " under development); the script was not run");
        }
        List<PlanWalker.Node> census = PlanWalker.census(parsed);
        for (PlanWalker.Node n : census) {
            if (NodeKinds.is(n.name, Kind.REFUSED)) {
                throw LockAnswer.unsupported("zklock does not lock " + n.name + "; the script"
                    + " was not run");
            }
        }
        List<LogicalPlan> stmts = new ArrayList<>();
        scriptStatements(parsed, stmts);
        List<Target> specs = new ArrayList<>();
        TreeSet<String> notes = new TreeSet<>();
        for (LogicalPlan stmt : stmts) {
            String sname = PlanWalker.nodeName(stmt);
            if (sname.equals("CompoundBody")) {
                continue;  // its statements are listed on their own
            }
            Plan sub = sname.equals(ExecuteImmediate.NODE)
                ? planExecuteImmediate(stmt, true) : planParsed(stmt, false);
            specs.addAll(sub.targets);
            notes.addAll(sub.notes);
        }
        specs.addAll(namedReads(census));
        Plan plan = command(specs, new ArrayList<>(notes));
        plan.whole = true;
        return plan;
    }

    private static void scriptStatements(LogicalPlan plan, List<LogicalPlan> out) {
        LogicalPlan statement = SqlScripts.statement(plan);
        if (statement != null) {
            out.add(statement);
            return;
        }
        scala.collection.Seq<LogicalPlan> kids = plan.children();
        for (int i = 0; i < kids.size(); i++) {
            scriptStatements(kids.apply(i), out);
        }
    }

    // ---- writes: from the parsed plan -----------------------------------------------------

    private List<Target> writes(String name, LogicalPlan parsed) {
        Kind kind = NodeKinds.kindOf(name);
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.InsertIntoStatement) {
            org.apache.spark.sql.catalyst.plans.logical.InsertIntoStatement ins =
                (org.apache.spark.sql.catalyst.plans.logical.InsertIntoStatement) parsed;
            Target table = namedTable(ins.table(), "X");
            if (table == null) {
                return new ArrayList<>();
            }
            Map<String, String> spec = new LinkedHashMap<>();
            scala.collection.Iterator<scala.Tuple2<String, scala.Option<String>>> it =
                ins.partitionSpec().iterator();
            while (it.hasNext()) {
                scala.Tuple2<String, scala.Option<String>> kv = it.next();
                spec.put(kv._1(), kv._2().isDefined() ? String.valueOf(kv._2().get()) : null);
            }
            return one(staticPrefix(table, spec));
        }
        if (kind == Kind.DATABASE_X) {
            List<String> parts = ident(parsed.children().apply(0));
            return one(Target.database(namedDatabase(parts, parsed),
                existingCreate(parsed) ? "S" : "X"));
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.RenameTable) {
            Target old = namedTable(parsed.children().apply(0), "X");
            List<String> newParts = PlanWalker.strings(
                ((org.apache.spark.sql.catalyst.plans.logical.RenameTable) parsed).newName());
            if (newParts.size() == 1 && old != null) {  // Spark renames within the old database
                newParts.add(0, old.db);
            }
            List<Target> out = new ArrayList<>();
            for (Target t : new Target[] {old, tableTarget(newParts, "X")}) {
                if (t != null) {
                    out.add(t);
                }
            }
            return out;
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.DeleteFromTable) {
            return onTable(((org.apache.spark.sql.catalyst.plans.logical.DeleteFromTable) parsed)
                .table(), "X");
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.UpdateTable) {
            return onTable(((org.apache.spark.sql.catalyst.plans.logical.UpdateTable) parsed)
                .table(), "X");
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable) {
            return onTable(((org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable) parsed)
                .targetTable(), "X");
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.InsertIntoDir) {
            scala.Option<java.net.URI> location =
                ((org.apache.spark.sql.catalyst.plans.logical.InsertIntoDir) parsed)
                .storage().locationUri();
            return location.isDefined() ? tablesAt(location.get().toString())
                : new ArrayList<>();
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.AddPartitions) {
            return onPartitions(parsed, seq(
                ((org.apache.spark.sql.catalyst.plans.logical.AddPartitions) parsed).parts()),
                "X");
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.DropPartitions) {
            return onPartitions(parsed, seq(
                ((org.apache.spark.sql.catalyst.plans.logical.DropPartitions) parsed).parts()),
                "X");
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.RenamePartitions) {
            org.apache.spark.sql.catalyst.plans.logical.RenamePartitions rp =
                (org.apache.spark.sql.catalyst.plans.logical.RenamePartitions) parsed;
            return onPartitions(parsed, List.of(rp.from(), rp.to()), "X");
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.TruncatePartition) {
            return onPartitions(parsed, List.of(
                ((org.apache.spark.sql.catalyst.plans.logical.TruncatePartition) parsed)
                .partitionSpec()), "X");
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.LoadData) {
            return onSpec(parsed, ((org.apache.spark.sql.catalyst.plans.logical.LoadData) parsed)
                .partition(), "X");
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.SetTableLocation) {
            return onSpec(parsed,
                ((org.apache.spark.sql.catalyst.plans.logical.SetTableLocation) parsed)
                .partitionSpec(), "X");
        }
        if (parsed instanceof
                org.apache.spark.sql.catalyst.plans.logical.SetTableSerDeProperties) {
            // Hive's lock table: S on T1
            return onSpec(parsed,
                ((org.apache.spark.sql.catalyst.plans.logical.SetTableSerDeProperties) parsed)
                .partitionSpec(), "S");
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.AnalyzeTable
                || parsed instanceof org.apache.spark.sql.catalyst.plans.logical.AnalyzeColumn) {
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
            Target table = namedTable(parsed.children().apply(0), "S");
            return table == null ? new ArrayList<>() : one(staticPrefix(table, spec));
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.AnalyzeTables) {
            List<String> parts = ident(parsed.children().apply(0));
            return one(Target.database(namedDatabase(parts, parsed), "S"));
        }
        SavedTable saved = savedTable(parsed);
        if (saved != null) {
            // DataFrameWriter.saveAsTable of a session-catalog table: X on it and on the tables
            // at its path option, S on what its query reads (a field Spark's tree walks do not
            // visit)
            Target table = tableTarget(parts(saved.table().identifier()), "X");
            List<Target> out = new ArrayList<>();
            if (table != null) {
                out.add(table);
            }
            scala.Option<java.net.URI> location = saved.table().storage().locationUri();
            if (location.isDefined()) {
                out.addAll(tablesAt(location.get().toString()));
            }
            if (saved.query() != null) {
                out.addAll(walker.reads(saved.query(), true, false));
            }
            return out;
        }
        if (parsed instanceof org.apache.spark.sql.execution.datasources
                .InsertIntoHadoopFsRelationCommand) {
            // DataFrameWriter.save of files (parquet, csv, ...): built by Spark as it runs
            org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand cmd =
                (org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand)
                parsed;
            if (cmd.catalogTable().isEmpty()) {
                return new ArrayList<>();  // the tables at its path: pathInserts, once
            }
            Target table = tableTarget(parts(cmd.catalogTable().get().identifier()), "X");
            return table == null ? new ArrayList<>()
                : one(staticPrefix(table, new LinkedHashMap<>(mapping(cmd.staticPartitions()))));
        }
        if (parsed instanceof org.apache.spark.sql.execution.datasources
                .SaveIntoDataSourceCommand) {
            // DataFrameWriter.save to a data source: the catalog tables stored at its path
            scala.Option<String> path = ((org.apache.spark.sql.execution.datasources
                .SaveIntoDataSourceCommand) parsed).options().get("path");
            return path.isDefined() ? tablesAt(path.get()) : new ArrayList<>();
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.V2WriteCommand) {
            // AppendData, OverwriteByExpression (Spark 4.0's REPLACE WHERE), ...: the table is
            // a field, not a child (the child is the query). A table given already resolved
            // (a DataSource V2 save) has no name here: refused, never written unlocked.
            LogicalPlan written = (LogicalPlan) ((org.apache.spark.sql.catalyst.plans.logical
                .V2WriteCommand) parsed).table();
            if (!ident(written).isEmpty()) {
                return onTable(written, "X");
            }
            if (written instanceof org.apache.spark.sql.execution.datasources.v2
                    .DataSourceV2Relation) {
                return resolvedV2Write((org.apache.spark.sql.execution.datasources.v2
                    .DataSourceV2Relation) written);
            }
            throw LockAnswer.unsupported("zklock cannot tell which table " + name
                + " writes (" + PlanWalker.nodeName(written) + "); the statement was not run");
        }
        if (parsed instanceof org.apache.spark.sql.execution.command.CreateTableLikeCommand) {
            // CREATE TABLE ... LIKE as Spark 4.0 parses it (4.1 parses a CreateTableLike)
            org.apache.spark.sql.execution.command.CreateTableLikeCommand like =
                (org.apache.spark.sql.execution.command.CreateTableLikeCommand) parsed;
            Target table = tableTarget(parts(like.targetTable()), "X");
            List<Target> out = table == null ? new ArrayList<>() : one(table);
            scala.Option<java.net.URI> location = like.fileFormat().locationUri();
            if (location.isDefined()) {
                out.addAll(tablesAt(location.get().toString()));
            }
            return out;
        }
        if (parsed instanceof org.apache.spark.sql.execution.command.RepairTableCommand) {
            // ALTER TABLE RECOVER PARTITIONS and Catalog.recoverPartitions as Spark 3.5's first
            // resolution pass leaves them (4.0 on read RecoverPartitions, as parsed)
            Target table = tableTarget(parts(((org.apache.spark.sql.execution.command
                .RepairTableCommand) parsed).tableName()), "X");
            return table == null ? new ArrayList<>() : one(table);
        }
        if (kind == Kind.TABLE_X) {
            return onTable(parsed.children().apply(0), existingCreate(parsed) ? "S" : "X");
        }
        if (kind == Kind.READS || kind == Kind.NO_LOCKS) {
            return new ArrayList<>();  // reads only: planned from the analyzed plan
        }
        // unknown() routes every other command to refusal or the conservative plan first
        throw LockAnswer.unsupported("zklock has no lock rule for " + name + "; the statement"
            + " was not run");
    }

    /** A CREATE ... IF NOT EXISTS of an object that exists: Spark does nothing, so it needs
     *  S, not X (the usual "make sure it exists" at a job's start must not wait for every
     *  reader and writer). The plan says "recheck": once granted, the statement is planned
     *  again under its locks, and if the object is gone by then it takes X after all. */
    private boolean existingCreate(LogicalPlan parsed) {
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
        List<String> parts = ident(parsed.children().apply(0));
        if (parts.isEmpty()) {
            return false;
        }
        if (parsed instanceof org.apache.spark.sql.catalyst.plans.logical.CreateNamespace) {
            return catalog.databaseExists(last(parts));
        }
        Target table = tableTarget(parts, "X");
        return table != null && tableMetadataOrNull(table) != null;
    }

    /** X on catalog tables whose files a statement's location touches: a table created or
     *  moved onto another's directory, or files LOAD DATA moves out of one. */
    private List<Target> locationWrites(String name, LogicalPlan parsed) {
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
        return location == null ? new ArrayList<>() : tablesAt(location);
    }

    /** X on a file-source INSERT's target, read off the analyzed command (else null). */
    private Target insertTarget(LogicalPlan analyzed) {
        if (!(analyzed instanceof org.apache.spark.sql.execution.datasources
                .InsertIntoHadoopFsRelationCommand)) {
            return null;
        }
        org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand cmd =
            (org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand)
            analyzed;
        if (cmd.catalogTable().isEmpty()) {
            return null;
        }
        CatalogTable table = cmd.catalogTable().get();
        Map<String, String> spec = new HashMap<>();
        scala.collection.Iterator<scala.Tuple2<String, String>> it =
            cmd.staticPartitions().iterator();
        while (it.hasNext()) {
            scala.Tuple2<String, String> kv = it.next();
            spec.put(kv._1(), kv._2());
        }
        return prefix(walker.table(table, "X"), PlanWalker.partitionColumns(table), spec);
    }

    private List<Target> onTable(LogicalPlan node, String mode) {
        if (PlanWalker.nodeName(node).equals("PlanWithUnresolvedIdentifier")) {
            throw LockAnswer.invalidArguments("zklock cannot tell which table"
                + " IDENTIFIER(<expression>) names before the statement runs; name it literally");
        }
        Target table = namedTable(node, mode);
        return table == null ? new ArrayList<>() : one(table);
    }

    private List<Target> onPartitions(LogicalPlan parsed, List<?> specs, String mode) {
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

    private List<Target> onSpec(LogicalPlan parsed,
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
    private Target staticPrefix(Target table, Map<String, String> spec) {
        if (spec.isEmpty()) {
            return table;
        }
        CatalogTable meta = tableMetadataOrNull(table);
        if (meta == null) {  // no such table (CREATE, or Spark will raise its own error)
            return table;
        }
        return prefix(table, PlanWalker.partitionColumns(meta), spec);
    }

    private static Target prefix(Target table, List<String[]> columns, Map<String, String> spec) {
        Map<String, String> values = new HashMap<>();
        for (Map.Entry<String, String> e : spec.entrySet()) {
            values.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue());
        }
        List<String[]> prefix = new ArrayList<>();
        for (String[] c : columns) {
            String value = values.get(c[0].toLowerCase(Locale.ROOT));
            String normal = value == null ? null : PlanWalker.normalizeValue(value, c[1]);
            if (normal == null) {
                break;
            }
            prefix.add(new String[] {c[0], normal});
        }
        return new Target(table.db, table.table, prefix, table.mode);
    }

    /** A V2 write Spark hands over with its table resolved (DataFrameWriter.save to a
     *  DataSource V2 source): X on the catalog table it names; without a catalog table (a
     *  path, or a sink such as noop), X on the catalog tables at its path, as a v1 save. */
    private List<Target> resolvedV2Write(
            org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation relation) {
        if (relation.identifier().isDefined()) {
            org.apache.spark.sql.connector.catalog.Identifier id = relation.identifier().get();
            if (id.namespace().length == 0) {
                throw LockAnswer.unsupported("zklock cannot tell which database a write to "
                    + id + " is in; the statement was not run");
            }
            List<String> parts = new ArrayList<>(List.of(id.namespace()));
            parts.add(id.name());
            Target table = tableTarget(parts, "X");
            if (table == null) {
                throw LockAnswer.unsupported("zklock cannot tell which table a write to "
                    + id + " is; the statement was not run");
            }
            return one(table);
        }
        String path = relation.options().get("path");
        return path == null ? new ArrayList<>() : tablesAt(path);
    }

    /** The table a DataFrame is saved as, whichever command the Spark line runs for it. */
    private static SavedTable savedTable(LogicalPlan parsed) {
        if (parsed instanceof org.apache.spark.sql.execution.datasources.CreateTable) {
            org.apache.spark.sql.execution.datasources.CreateTable create =
                (org.apache.spark.sql.execution.datasources.CreateTable) parsed;
            return new SavedTable(create.tableDesc(),
                create.query().isDefined() ? create.query().get() : null);
        }
        return SaveAsTable.command(parsed);
    }

    // ---- names and the catalog -------------------------------------------------------------

    /** The name a statement gives at {@code node}: as parsed, or as Spark resolved it (a
     *  command Spark builds already resolved, and on Spark 3.5 the first form an extension
     *  sees of a command built without SQL); empty when the node names nothing zklock can
     *  read. */
    private List<String> ident(LogicalPlan node) {
        scala.collection.Seq<String> parts = PlanWalker.nameParts(node);
        if (parts != null) {
            return PlanWalker.strings(parts);
        }
        if (node instanceof org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias) {
            return ident(((org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias) node)
                .child());
        }
        if (node.nodeName().startsWith("CurrentNamespace")) {
            List<String> out = new ArrayList<>();
            out.add(catalog.getCurrentDatabase());
            return out;
        }
        if (node instanceof org.apache.spark.sql.catalyst.analysis.ResolvedNamespace) {
            return PlanWalker.strings(((org.apache.spark.sql.catalyst.analysis.ResolvedNamespace)
                node).namespace());
        }
        org.apache.spark.sql.connector.catalog.Identifier id = PlanWalker.resolvedName(node);
        if (id != null && id.namespace().length == 0
                && !(node instanceof org.apache.spark.sql.catalyst.analysis.ResolvedTempView)) {
            return new ArrayList<>();  // a table of a catalog with flat names: no database
        }
        if (id != null) {
            List<String> out = new ArrayList<>(List.of(id.namespace()));
            out.add(id.name());
            return out;
        }
        org.apache.spark.sql.catalyst.TableIdentifier table = PlanWalker.resolvedTable(node);
        return table != null ? parts(table) : new ArrayList<>();
    }

    /** The database a statement names ({@code parts}, from its child); refused when it names
     *  none zklock can read. */
    private static String namedDatabase(List<String> parts, LogicalPlan parsed) {
        if (parts.isEmpty()) {
            throw LockAnswer.unsupported("zklock cannot tell which database "
                + PlanWalker.nodeName(parsed) + " names; the statement was not run");
        }
        return last(parts);
    }

    /** The table or view a write names at {@code node}; null for a temporary view. Refused
     *  when the node names nothing zklock can read: that is never "nothing to lock". */
    private Target namedTable(LogicalPlan node, String mode) {
        List<String> parts = ident(node);
        if (parts.isEmpty()) {
            throw LockAnswer.unsupported("zklock cannot tell which table "
                + PlanWalker.nodeName(node) + " names; the statement was not run");
        }
        return tableTarget(parts, mode);
    }

    /** A table from its name parts; null for temporary views and non-tables. The catalog part
     *  of a three-part name is dropped: all catalogs share one lock namespace, which can only
     *  add conflicts, never lose one. */
    private Target tableTarget(List<String> parts, String mode) {
        if (parts == null || parts.isEmpty()) {
            return null;
        }
        if (parts.size() == 1) {
            if (catalog.getTempView(parts.get(0)).isDefined()) {
                return null;
            }
            return new Target(catalog.getCurrentDatabase(), parts.get(0), List.of(), mode);
        }
        return new Target(parts.get(parts.size() - 2), last(parts), List.of(), mode);
    }

    private CatalogTable tableMetadataOrNull(Target table) {
        try {
            return catalog.getTableMetadata(new org.apache.spark.sql.catalyst.TableIdentifier(
                table.table, scala.Option.apply(table.db)));
        } catch (Exception e) {
            return null;
        }
    }

    private String qualify(String path) {
        org.apache.hadoop.fs.Path target = new org.apache.hadoop.fs.Path(path);
        try {
            return target.getFileSystem(session.sparkContext().hadoopConfiguration())
                .makeQualified(target).toString();
        } catch (IOException e) {
            throw LockAnswer.invalidArguments("zklock cannot resolve the path " + path + ": "
                + e);
        }
    }

    /** X on the catalog tables a write to {@code path} touches: stored at it, below it
     *  (overwriting a parent directory replaces them) or above it (a file written inside a
     *  table's directory is a write to that table). */
    /** X on every catalog table whose directory {@code path} is, lies in, or contains. */
    List<Target> tablesAt(String path) {
        String target = rstripSlash(qualify(path));
        List<Target> out = new ArrayList<>();
        ExternalCatalog external = catalog.externalCatalog();
        for (String db : PlanWalker.strings(external.listDatabases())) {
            var names = external.listTables(db);  // a Seq of Scala 2.12 or 2.13, as Spark's
            if (names.isEmpty()) {
                continue;
            }
            scala.collection.Seq<CatalogTable> tables = external.getTablesByName(db, names);
            for (int i = 0; i < tables.size(); i++) {
                CatalogTable t = tables.apply(i);
                if (!t.storage().locationUri().isDefined()) {
                    continue;
                }
                String location = rstripSlash(qualify(t.storage().locationUri().get().toString()));
                if (target.equals(location) || target.startsWith(location + "/")
                        || location.startsWith(target + "/")) {
                    out.add(new Target(db, t.identifier().table(), List.of(), "X"));
                }
            }
        }
        return out;
    }

    // ---- small helpers ---------------------------------------------------------------------

    private static String rstripSlash(String s) {
        int end = s.length();
        while (end > 0 && s.charAt(end - 1) == '/') {
            end--;
        }
        return s.substring(0, end);
    }

    private static <T> T option(scala.Option<T> value) {
        return value.isDefined() ? value.get() : null;
    }

    private static String last(List<String> parts) {
        return parts.get(parts.size() - 1);
    }

    private static List<String> parts(org.apache.spark.sql.catalyst.TableIdentifier id) {
        List<String> out = new ArrayList<>();
        if (id.database().isDefined()) {
            out.add(id.database().get());
        }
        out.add(id.table());
        return out;
    }

    private static List<Target> one(Target target) {
        List<Target> out = new ArrayList<>();
        out.add(target);
        return out;
    }

    private static List<Object> seq(scala.collection.Seq<?> seq) {
        List<Object> out = new ArrayList<>();
        for (int i = 0; i < seq.size(); i++) {
            out.add(seq.apply(i));
        }
        return out;
    }

    private static Map<String, String> mapping(scala.collection.Map<String, String> map) {
        Map<String, String> out = new LinkedHashMap<>();
        scala.collection.Iterator<scala.Tuple2<String, String>> it = map.iterator();
        while (it.hasNext()) {
            scala.Tuple2<String, String> kv = it.next();
            out.put(kv._1(), String.valueOf(kv._2()));
        }
        return out;
    }

    private static String firstLine(Throwable e) {
        String text = e.getMessage() == null ? "" : e.getMessage().strip();
        if (text.isEmpty()) {
            return e.getClass().getSimpleName();
        }
        return text.split("\\R", 2)[0];
    }
}
