// zklock's lock planner, run inside Spark's JVM: the same rules as zklock/spark/planner.py,
// for processes that have no Python next to Spark's analyzer (the Spark Connect server, see
// ConnectLockPlugin.java). Given SQL text or a logical plan it returns the normalised lock
// list, one "object TAB mode" line each in acquisition order, or one refusal line:
// "ERROR TAB message" where planner.py raises UnsupportedStatement, "INVALID TAB message"
// where it raises InvalidArguments, "OBJECT TAB [name, reason]" (JSON) where it raises
// InvalidLockObject. Spark's own errors (ParseException, AnalysisException) are thrown, as
// Spark throws them.
//
// What each plan node class means is not written here: it is read from the resource
// zklock/node-kinds.tsv, which zklock/spark/connect_plugin.py generates from
// zklock/spark/nodes.py (and planner.py's sets of node names) when it builds the jar, so
// nodes.py stays the one definition.
// Reads are computed by PlanWalker.java, as for the classic planner. The parity test
// (tests/spark/test_spark_jvm_planner.py) runs both planners on every statement of the corpus.
package zklock;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.math.BigInteger;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.spark.sql.catalyst.analysis.UnresolvedExecuteImmediate;
import org.apache.spark.sql.catalyst.analysis.UnresolvedPartitionSpec;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.ExternalCatalog;
import org.apache.spark.sql.catalyst.catalog.SessionCatalog;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.trees.TreePattern$;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.CommandExecutionMode;
import org.apache.spark.sql.types.StructField;

public final class LockPlanner {
    /** The node table resource (generated from zklock/spark/nodes.py). */
    public static final String NODE_TABLE = "/zklock/node-kinds.tsv";

    private static final Map<String, String> KINDS = new HashMap<>();
    private static final List<String> WRITE_WORDS = new ArrayList<>();
    private static final Map<String, Set<String>> SETS = new HashMap<>();
    private static final Map<String, String> VALUES = new HashMap<>();
    private static final String TABLE_ERROR;

    static {
        String error = null;
        try (InputStream in = LockPlanner.class.getResourceAsStream(NODE_TABLE)) {
            if (in == null) {
                error = "zklock's node table (" + NODE_TABLE + ") is missing from the class"
                    + " path: build the jar with zklock.spark.connect_plugin.plugin_jar()";
            } else {
                BufferedReader r = new BufferedReader(
                    new InputStreamReader(in, StandardCharsets.UTF_8));
                String line;
                while ((line = r.readLine()) != null) {
                    if (line.isEmpty() || line.startsWith("#")) {
                        continue;
                    }
                    String[] f = line.split("\t");
                    if (f.length == 3 && f[0].equals("node")) {
                        KINDS.putIfAbsent(f[1], f[2]);
                    } else if (f.length == 2 && f[0].equals("word")) {
                        WRITE_WORDS.add(f[1]);
                    } else if (f.length == 3 && f[0].equals("set")) {
                        SETS.computeIfAbsent(f[1], k -> new HashSet<>()).add(f[2]);
                    } else if (f.length == 3 && f[0].equals("value")) {
                        VALUES.put(f[1], f[2]);
                    }
                }
            }
        } catch (IOException e) {
            error = "zklock's node table could not be read: " + e;
        }
        if (error == null && (KINDS.isEmpty() || !VALUES.containsKey("MAX_PINNED")
                || !SETS.keySet().containsAll(List.of("VIEW_DDL", "KNOWN_QUERIES",
                                                      "STATEMENT_CONTAINERS")))) {
            error = "zklock's node table (" + NODE_TABLE + ") is incomplete: rebuild the jar"
                + " with zklock.spark.connect_plugin.plugin_jar()";
        }
        TABLE_ERROR = error;
    }

    // planner.py's own sets of node names and its pin limit, from the same resource.
    private static final Set<String> VIEW_DDL = set("VIEW_DDL");
    private static final Set<String> KNOWN_QUERIES = set("KNOWN_QUERIES");
    private static final Set<String> STATEMENT_CONTAINERS = set("STATEMENT_CONTAINERS");
    private static final int MAX_PINNED = Integer.parseInt(VALUES.getOrDefault("MAX_PINNED", "0"));
    /** Spark's integral type names: a static partition value on them is stored as a number. */
    private static final Set<String> INTEGRAL = Set.of("byte", "short", "integer", "long");

    private static Set<String> set(String name) {
        return Collections.unmodifiableSet(SETS.getOrDefault(name, new HashSet<>()));
    }

    /** A refusal: planner.py's UnsupportedStatement ("ERROR") or InvalidArguments ("INVALID"). */
    static final class Refusal extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final String kind;

        Refusal(String kind, String message) {
            super(message, null, false, false);
            this.kind = kind;
        }
    }

    private static Refusal refused(String message) {
        return new Refusal("ERROR", message);
    }

    private static Refusal invalid(String message) {
        return new Refusal("INVALID", message);
    }

    private final SparkSession session;
    private final SessionCatalog catalog;
    private final PlanWalker walker;
    private final String unknownStatements;

    /** A planner on {@code session}; {@code unknownStatements} is "refuse" or "lock". */
    public LockPlanner(SparkSession session, String unknownStatements) {
        if (TABLE_ERROR != null) {
            throw new IllegalStateException(TABLE_ERROR);
        }
        this.session = session;
        this.catalog = session.sessionState().catalog();
        this.walker = new PlanWalker(catalog);
        this.unknownStatements = unknownStatements == null ? "refuse" : unknownStatements;
    }

    /** How many node classes the loaded table classifies (a sanity check for callers). */
    public static int nodeCount() {
        return KINDS.size();
    }

    // ---- entry points: each returns the lock lines, or one refusal line ------------------

    /** planner.py's {@code plan_parsed(parse(sql), strict)}: ParseException is thrown. */
    public String planSql(String sql, boolean strict) {
        return planPlan(parse(sql), strict);
    }

    /** {@link #planSql}, preceded by the line "KIND TAB command" or "KIND TAB query": whether
     *  Spark runs the statement as a command in sql() (planner.py's LockPlan.is_command). A
     *  lock object's name is lower case, so it is never "KIND". */
    public String planStatement(String sql, boolean strict) {
        try {
            Planned planned = planParsed(parse(sql), strict);
            return "KIND\t" + (planned.command ? "command" : "query") + "\n"
                + render(planned.locks);
        } catch (Refusal r) {
            return r.kind + "\t" + r.getMessage();
        } catch (InvalidObject e) {
            return e.line();
        }
    }

    /** The locks of a plan that has not been analyzed yet (a parsed statement, or the plan
     *  Spark Connect's planner builds from a DataFrame's relation). */
    public String planPlan(LogicalPlan plan, boolean strict) {
        try {
            return render(planParsed(plan, strict).locks);
        } catch (Refusal r) {
            return r.kind + "\t" + r.getMessage();
        } catch (InvalidObject e) {
            return e.line();
        }
    }

    /** planner.py's {@code plan_dataframe}: S on what an action on {@code ds} reads. */
    public String planDataFrame(org.apache.spark.sql.classic.Dataset<?> ds) {
        try {
            return render(normalize(reads(ds.queryExecution().analyzed(), true, false)));
        } catch (Refusal r) {
            return r.kind + "\t" + r.getMessage();
        } catch (InvalidObject e) {
            return e.line();
        }
    }

    /**
     * planner.py's {@code plan_table_write} and the path writes of a LockingSession: X on
     * {@code table} (or its static {@code partition} prefix) when it is not null, X on every
     * catalog table stored at, above or below each of {@code paths} (may be null), plus the
     * locks of {@code source}, the written DataFrame's plan (may be null), planned as above.
     */
    public String planWrite(String table, Map<String, String> partition, List<String> paths,
                            LogicalPlan source) {
        try {
            List<Lock> specs = new ArrayList<>();
            if (table != null) {
                Obj obj = tableObject(nameParts(table));
                if (obj != null) {
                    specs.add(new Lock(staticPrefix(obj,
                        partition == null ? new HashMap<>() : partition), "X"));
                }
            }
            if (paths != null) {
                for (String path : paths) {
                    for (Obj obj : tablesAt(path)) {
                        specs.add(new Lock(obj, "X"));
                    }
                }
            }
            if (source != null) {
                specs.addAll(planParsed(source, true).locks);
            }
            return render(normalize(specs));
        } catch (Refusal r) {
            return r.kind + "\t" + r.getMessage();
        } catch (InvalidObject e) {
            return e.line();
        }
    }

    private static String render(List<Lock> locks) {
        StringBuilder out = new StringBuilder();
        for (Lock l : locks) {
            out.append(l.obj.name()).append('\t').append(l.mode).append('\n');
        }
        return out.toString();
    }

    // ---- planner.py's plan_parsed ---------------------------------------------------------

    private static final class Node {
        final String name;
        final boolean command;
        final List<String> parts;  // null: the node names no table or namespace

        Node(String name, boolean command, List<String> parts) {
            this.name = name;
            this.command = command;
            this.parts = parts;
        }
    }

    /** A statement's locks, and whether Spark runs it as a command (eagerly, in sql()). */
    private static final class Planned {
        final List<Lock> locks;
        final boolean command;

        Planned(List<Lock> locks, boolean command) {
            this.locks = locks;
            this.command = command;
        }
    }

    private static final class Statement {
        final String name;
        final LogicalPlan node;

        Statement(String name, LogicalPlan node) {
            this.name = name;
            this.node = node;
        }
    }

    private Planned planParsed(LogicalPlan parsed, boolean strict) {
        String name = nodeName(parsed);
        if ("NO_LOCKS".equals(KINDS.get(name))) {
            return new Planned(new ArrayList<>(), true);
        }
        if (name.equals("PlanWithUnresolvedIdentifier")) {
            throw invalid("zklock cannot tell which object IDENTIFIER(<expression>) names"
                + " before the statement runs; name it literally");
        }
        if (name.equals("UnresolvedExecuteImmediate")) {
            return new Planned(planExecuteImmediate(parsed, false), true);
        }
        if (name.equals("CompoundBody")) {
            return new Planned(planScript(parsed), true);
        }
        List<Node> census = census(parsed);
        List<Statement> statements = statements(parsed);
        refuseUnplannable(census, statements);
        List<String> unknown = unknown(census, statements);
        if (!unknown.isEmpty()) {
            return new Planned(conservative(census, unknown), true);
        }
        LogicalPlan analyzed;
        try {
            analyzed = session.sessionState()
                .executePlan(parsed, CommandExecutionMode.SKIP()).analyzed();
        } catch (Exception e) {
            if (strict) {
                throw sneaky(e);
            }
            List<Lock> specs = new ArrayList<>();
            for (Statement s : statements) {
                specs.addAll(writes(s.name, s.node, true));
            }
            specs.addAll(namedReads(census));
            return new Planned(normalize(specs), true);
        }
        List<Node> analyzedCensus = census(analyzed);
        unknown = unknown(analyzedCensus, new ArrayList<>());
        if (!unknown.isEmpty()) {
            return new Planned(conservative(census, unknown), true);
        }
        boolean isCommand;
        if (!statements.isEmpty()) {
            isCommand = true;
        } else if (KNOWN_QUERIES.contains(name)) {
            isCommand = false;
        } else {
            isCommand = analyzed instanceof Command;
        }
        List<Lock> specs = new ArrayList<>();
        for (Statement s : statements) {
            List<Lock> insert = s.node == parsed && s.name.equals("InsertIntoStatement")
                ? insertTarget(analyzed) : null;
            specs.addAll(insert != null ? insert : writes(s.name, s.node, true));
        }
        for (Node n : analyzedCensus) {
            if (n.name.equals("InsertIntoHadoopFsRelationCommand")) {
                specs.addAll(pathInserts(analyzed));
                break;
            }
        }
        specs.addAll(reads(analyzed, !VIEW_DDL.contains(name), isCommand));
        return new Planned(normalize(specs), isCommand);
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
            return strings(session.sessionState().sqlParser().parseMultipartIdentifier(name));
        } catch (Exception e) {
            throw sneaky(e);
        }
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
        throw (E) e;  // rethrow Spark's own (Scala: undeclared checked) exception unchanged
    }

    private List<Lock> pathInserts(LogicalPlan analyzed) {
        List<Lock> out = new ArrayList<>();
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
                    for (Obj obj : tablesAt(cmd.outputPath().toString())) {
                        out.add(new Lock(obj, "X"));
                    }
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

    private static List<Node> census(LogicalPlan plan) {
        List<Node> out = new ArrayList<>();
        for (String line : PlanWalker.census(plan).split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t", -1);
            List<String> parts = null;
            if (!f[2].isEmpty()) {
                parts = new ArrayList<>();
                for (String p : f[2].split("\\.", -1)) {
                    parts.add(dec(p));
                }
            }
            out.add(new Node(f[0], f[1].equals("C"), parts));
        }
        return out;
    }

    private List<Statement> statements(LogicalPlan parsed) {
        String name = nodeName(parsed);
        List<Statement> out = new ArrayList<>();
        if (STATEMENT_CONTAINERS.contains(name)) {
            scala.collection.Seq<LogicalPlan> kids = parsed.children();
            for (int i = 0; i < kids.size(); i++) {
                out.addAll(statements(kids.apply(i)));
            }
            return out;
        }
        String kind = KINDS.get(name);
        if ((kind == null || kind.equals("QUERY")) && !(parsed instanceof Command)) {
            return out;
        }
        out.add(new Statement(name, parsed));
        return out;
    }

    private static void refuseUnplannable(List<Node> census, List<Statement> statements) {
        for (Node n : census) {
            String kind = KINDS.get(n.name);
            if ("REFUSED".equals(kind)) {
                throw refused("zklock does not lock " + n.name + ": streaming sinks, pipelines,"
                    + " stored procedures and external commands are not locked; the statement"
                    + " was not run");
            }
            if ("EXECUTE".equals(kind) || "SCRIPT".equals(kind)) {
                throw refused("zklock cannot lock " + n.name + " nested inside another"
                    + " statement; run it as a statement of its own");
            }
        }
        Set<String> found = new HashSet<>();
        for (Statement s : statements) {
            found.add(s.name);
        }
        for (Node n : census) {
            String kind = KINDS.get(n.name);
            if (("TABLE_X".equals(kind) || "DATABASE_X".equals(kind) || "STATEMENT".equals(kind))
                    && !found.contains(n.name)) {
                throw refused("zklock found " + n.name + " nested where Spark may run it and"
                    + " zklock does not plan it; the statement was not run");
            }
        }
    }

    /** nodes.py's is_unknown_write. */
    private static boolean isUnknownWrite(String name, boolean isCommand) {
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

    private static List<String> unknown(List<Node> census, List<Statement> statements) {
        TreeSet<String> names = new TreeSet<>();
        for (Node n : census) {
            if (isUnknownWrite(n.name, n.command)) {
                names.add(n.name);
            }
        }
        for (Statement s : statements) {
            if (!KINDS.containsKey(s.name)) {
                names.add(s.name);
            }
        }
        return new ArrayList<>(names);
    }

    private List<Lock> conservative(List<Node> census, List<String> unknown) {
        if (!unknownStatements.equals("lock")) {
            throw refused("zklock has no lock rule for " + String.join(", ", unknown) + ", so the"
                + " statement was not run; SET zklock.unknown.statements=lock"
                + " (spark.zklock.unknown.statements) to lock every table it names in X"
                + " instead");
        }
        List<Lock> specs = new ArrayList<>();
        for (Obj obj : namedObjects(census)) {
            specs.add(new Lock(obj, "X"));
        }
        return normalize(specs);
    }

    private List<Obj> namedObjects(List<Node> census) {
        List<Obj> out = new ArrayList<>();
        for (Node n : census) {
            if (n.parts == null || n.parts.isEmpty()) {
                continue;
            }
            if (n.name.equals("UnresolvedNamespace")) {
                out.add(new Obj(last(n.parts), null, List.of()));
                continue;
            }
            Obj obj = tableObject(n.parts);
            if (obj != null) {
                out.add(obj);
            }
        }
        return out;
    }

    private List<Lock> namedReads(List<Node> census) {
        List<Lock> out = new ArrayList<>();
        for (Node n : census) {
            if (!n.name.equals("UnresolvedRelation") || n.parts == null || n.parts.isEmpty()) {
                continue;
            }
            Obj obj = tableObject(n.parts);
            if (obj == null) {
                continue;
            }
            out.add(new Lock(obj, "S"));
            for (Obj p : existingPartitions(obj)) {
                out.add(new Lock(p, "S"));
            }
        }
        return out;
    }

    private List<Obj> existingPartitions(Obj table) {
        List<String> cols = new ArrayList<>();
        List<String> names;
        try {
            CatalogTable meta = tableMetadata(table.db, table.table);
            for (String[] c : partitionSchema(meta)) {
                cols.add(c[0]);
            }
            names = cols.isEmpty() ? new ArrayList<>() : partitionNames(meta);
        } catch (Exception e) {  // no such table (yet): the table-level lock is all there is
            return new ArrayList<>();
        }
        return expand(table, cols, new HashMap<>(), names);
    }

    // ---- EXECUTE IMMEDIATE and SQL scripts ------------------------------------------------

    private List<Lock> planExecuteImmediate(LogicalPlan parsed, boolean inScript) {
        Expression expr = ((UnresolvedExecuteImmediate) parsed).sqlStmtStr();
        String inner;
        if (expr.nodeName().equals("Literal")) {
            Object value = ((Literal) expr).value();
            inner = value != null ? value.toString() : null;
        } else if (inScript) {
            throw refused("zklock cannot know the statement EXECUTE IMMEDIATE runs inside a SQL"
                + " script (" + expr.sql() + ") before the script runs; use a string literal");
        } else if (expr.containsPattern(TreePattern$.MODULE$.PLAN_EXPRESSION())) {
            throw refused("zklock evaluates EXECUTE IMMEDIATE's text before running it, and this"
                + " text reads tables (a subquery); use a literal or a session variable");
        } else {
            inner = evaluateText(expr.sql());
        }
        if (inner == null) {
            throw refused("EXECUTE IMMEDIATE of a NULL statement text");
        }
        return planParsed(parse(inner), false).locks;
    }

    private String evaluateText(String exprSql) {
        LogicalPlan plan;
        try {
            plan = parse("SELECT CAST((" + exprSql + ") AS STRING)");
        } catch (Exception e) {
            throw refused("zklock cannot evaluate the text of EXECUTE IMMEDIATE (" + exprSql
                + "): " + firstLine(e));
        }
        for (Node n : census(plan)) {
            if (!"QUERY".equals(KINDS.get(n.name)) || (n.parts != null && !n.parts.isEmpty())) {
                throw refused("zklock evaluates EXECUTE IMMEDIATE's text before running it, and ("
                    + exprSql + ") reads tables; use a literal or a session variable");
            }
        }
        try {
            LogicalPlan analyzed = session.sessionState()
                .executePlan(plan, CommandExecutionMode.SKIP()).analyzed();
            List<org.apache.spark.sql.Row> rows =
                org.apache.spark.sql.classic.Dataset.ofRows(session, analyzed).collectAsList();
            Object value = rows.get(0).get(0);
            return value == null ? null : value.toString();
        } catch (Exception e) {
            throw refused("zklock cannot evaluate the text of EXECUTE IMMEDIATE (" + exprSql
                + "): " + firstLine(e));
        }
    }

    private List<Lock> planScript(LogicalPlan parsed) {
        List<Lock> specs = new ArrayList<>();
        List<Node> census = census(parsed);
        for (Node n : census) {
            if ("REFUSED".equals(KINDS.get(n.name))) {
                throw refused("zklock does not lock " + n.name + "; the script was not run");
            }
        }
        List<LogicalPlan> stmts = new ArrayList<>();
        scriptStatements(parsed, stmts);
        for (LogicalPlan stmt : stmts) {
            String sname = nodeName(stmt);
            if (sname.equals("UnresolvedExecuteImmediate")) {
                specs.addAll(planExecuteImmediate(stmt, true));
            } else if (!sname.equals("CompoundBody")) {
                specs.addAll(planParsed(stmt, false).locks);
            }
        }
        specs.addAll(namedReads(census));
        return normalize(specs);
    }

    private static void scriptStatements(LogicalPlan plan, List<LogicalPlan> out) {
        if (plan instanceof org.apache.spark.sql.catalyst.plans.logical.SingleStatement) {
            out.add(((org.apache.spark.sql.catalyst.plans.logical.SingleStatement) plan)
                .parsedPlan());
            return;
        }
        scala.collection.Seq<LogicalPlan> kids = plan.children();
        for (int i = 0; i < kids.size(); i++) {
            scriptStatements(kids.apply(i), out);
        }
    }

    // ---- writes: from the parsed plan (planner.py's _writes) -------------------------------

    private List<Lock> writes(String name, LogicalPlan parsed, boolean isCommand) {
        String kind = KINDS.get(name);
        if (name.equals("InsertIntoStatement")) {
            org.apache.spark.sql.catalyst.plans.logical.InsertIntoStatement ins =
                (org.apache.spark.sql.catalyst.plans.logical.InsertIntoStatement) parsed;
            Obj obj = tableObject(ident(ins.table()));
            if (obj == null) {
                return new ArrayList<>();
            }
            Map<String, String> spec = new LinkedHashMap<>();
            scala.collection.Iterator<scala.Tuple2<String, scala.Option<String>>> it =
                ins.partitionSpec().iterator();
            while (it.hasNext()) {
                scala.Tuple2<String, scala.Option<String>> kv = it.next();
                spec.put(kv._1(), kv._2().isDefined() ? String.valueOf(kv._2().get()) : null);
            }
            return one(staticPrefix(obj, spec), "X");
        }
        if ("DATABASE_X".equals(kind)) {
            List<String> parts = ident(parsed.children().apply(0));
            return parts.isEmpty() ? new ArrayList<>()
                : one(new Obj(last(parts), null, List.of()), "X");
        }
        if (name.equals("RenameTable")) {
            Obj old = tableObject(ident(parsed.children().apply(0)));
            List<String> newParts = strings(
                ((org.apache.spark.sql.catalyst.plans.logical.RenameTable) parsed).newName());
            if (newParts.size() == 1 && old != null) {  // Spark renames within the old database
                newParts.add(0, old.db);
            }
            Obj renamed = tableObject(newParts);
            List<Lock> out = new ArrayList<>();
            for (Obj o : new Obj[] {old, renamed}) {
                if (o != null) {
                    out.add(new Lock(o, "X"));
                }
            }
            return out;
        }
        if (name.equals("DeleteFromTable")) {
            return onTable(((org.apache.spark.sql.catalyst.plans.logical.DeleteFromTable) parsed)
                .table(), "X");
        }
        if (name.equals("UpdateTable")) {
            return onTable(((org.apache.spark.sql.catalyst.plans.logical.UpdateTable) parsed)
                .table(), "X");
        }
        if (name.equals("MergeIntoTable")) {
            return onTable(((org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable) parsed)
                .targetTable(), "X");
        }
        if (name.equals("InsertIntoDir")) {
            scala.Option<java.net.URI> location =
                ((org.apache.spark.sql.catalyst.plans.logical.InsertIntoDir) parsed)
                .storage().locationUri();
            List<Lock> out = new ArrayList<>();
            if (location.isDefined()) {
                for (Obj obj : tablesAt(location.get().toString())) {
                    out.add(new Lock(obj, "X"));
                }
            }
            return out;
        }
        if (name.equals("AddPartitions")) {
            return onPartitions(parsed, seq(
                ((org.apache.spark.sql.catalyst.plans.logical.AddPartitions) parsed).parts()),
                "X");
        }
        if (name.equals("DropPartitions")) {
            return onPartitions(parsed, seq(
                ((org.apache.spark.sql.catalyst.plans.logical.DropPartitions) parsed).parts()),
                "X");
        }
        if (name.equals("RenamePartitions")) {
            org.apache.spark.sql.catalyst.plans.logical.RenamePartitions rp =
                (org.apache.spark.sql.catalyst.plans.logical.RenamePartitions) parsed;
            List<Object> specs = new ArrayList<>();
            specs.add(rp.from());
            specs.add(rp.to());
            return onPartitions(parsed, specs, "X");
        }
        if (name.equals("TruncatePartition")) {
            List<Object> specs = new ArrayList<>();
            specs.add(((org.apache.spark.sql.catalyst.plans.logical.TruncatePartition) parsed)
                .partitionSpec());
            return onPartitions(parsed, specs, "X");
        }
        if (name.equals("LoadData")) {
            return onSpec(parsed, ((org.apache.spark.sql.catalyst.plans.logical.LoadData) parsed)
                .partition(), "X");
        }
        if (name.equals("SetTableLocation")) {
            return onSpec(parsed,
                ((org.apache.spark.sql.catalyst.plans.logical.SetTableLocation) parsed)
                .partitionSpec(), "X");
        }
        if (name.equals("SetTableSerDeProperties")) {  // Hive's lock table: S on T1
            return onSpec(parsed,
                ((org.apache.spark.sql.catalyst.plans.logical.SetTableSerDeProperties) parsed)
                .partitionSpec(), "S");
        }
        if (name.equals("AnalyzeTable") || name.equals("AnalyzeColumn")) {
            Map<String, String> spec = new LinkedHashMap<>();
            if (name.equals("AnalyzeTable")) {
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
            Obj obj = tableObject(ident(parsed.children().apply(0)));
            return obj == null ? new ArrayList<>() : one(staticPrefix(obj, spec), "S");
        }
        if (name.equals("AnalyzeTables")) {
            List<String> parts = ident(parsed.children().apply(0));
            return parts.isEmpty() ? new ArrayList<>()
                : one(new Obj(last(parts), null, List.of()), "S");
        }
        if ("TABLE_X".equals(kind)) {
            return onTable(parsed.children().apply(0), "X");
        }
        if ("READS".equals(kind) || "NO_LOCKS".equals(kind)) {
            return new ArrayList<>();  // reads only: planned from the analyzed plan
        }
        if (!isCommand) {
            return new ArrayList<>();
        }
        throw refused("zklock has no lock rule for " + name + "; the statement was not run");
    }

    /** X for a file-source INSERT, read off the analyzed command (else null). */
    private List<Lock> insertTarget(LogicalPlan analyzed) {
        String text = walker.insertTarget(analyzed);
        if (text.isEmpty()) {
            return null;
        }
        String[] f = text.split("\t", -1);
        List<String> parts = List.of(dec(f[0]).split("\\.", -1));
        Obj table = new Obj(parts.size() >= 2 ? parts.get(parts.size() - 2)
            : catalog.getCurrentDatabase(), last(parts), List.of());
        Map<String, String> spec = new HashMap<>();
        for (String item : f[2].split(",")) {
            if (item.isEmpty()) {
                continue;
            }
            int eq = item.indexOf('=');
            String key = eq < 0 ? item : item.substring(0, eq);
            String value = eq < 0 ? "" : item.substring(eq + 1);
            spec.put(dec(key).toLowerCase(Locale.ROOT), dec(value));
        }
        List<String[]> prefix = new ArrayList<>();
        for (String item : f[1].split(",")) {
            if (item.isEmpty()) {
                continue;
            }
            int colon = item.indexOf(':');
            String col = dec(colon < 0 ? item : item.substring(0, colon));
            String typ = dec(colon < 0 ? "" : item.substring(colon + 1));
            String value = spec.get(col.toLowerCase(Locale.ROOT));
            if (value == null) {
                break;
            }
            prefix.add(new String[] {col, normalizeValue(value, typ)});
        }
        return one(new Obj(table.db, table.table, prefix), "X");
    }

    private List<Lock> onTable(LogicalPlan node, String mode) {
        if (node.nodeName().equals("PlanWithUnresolvedIdentifier")) {
            throw invalid("zklock cannot tell which table IDENTIFIER(<expression>) names before"
                + " the statement runs; name it literally");
        }
        Obj obj = tableObject(ident(node));
        return obj == null ? new ArrayList<>() : one(obj, mode);
    }

    private List<Lock> onPartitions(LogicalPlan parsed, List<?> specs, String mode) {
        Obj obj = tableObject(ident(parsed.children().apply(0)));
        if (obj == null) {
            return new ArrayList<>();
        }
        List<Lock> out = new ArrayList<>();
        for (Object spec : specs) {
            if (!(spec instanceof UnresolvedPartitionSpec)) {
                return one(obj, mode);
            }
            out.add(new Lock(staticPrefix(obj, mapping(((UnresolvedPartitionSpec) spec).spec())),
                mode));
        }
        return out;
    }

    private List<Lock> onSpec(LogicalPlan parsed,
                              scala.Option<scala.collection.immutable.Map<String, String>> spec,
                              String mode) {
        Obj obj = tableObject(ident(parsed.children().apply(0)));
        if (obj == null) {
            return new ArrayList<>();
        }
        return one(staticPrefix(obj, spec.isDefined() ? mapping(spec.get()) : new HashMap<>()),
            mode);
    }

    /** The table, or its partition given by the leading static values of {@code spec}. */
    private Obj staticPrefix(Obj table, Map<String, String> spec) {
        if (spec.isEmpty()) {
            return table;
        }
        Map<String, String> values = new HashMap<>();
        for (Map.Entry<String, String> e : spec.entrySet()) {
            values.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue());
        }
        List<String[]> columns;
        try {
            columns = partitionSchema(tableMetadata(table.db, table.table));
        } catch (Exception e) {  // no such table (CREATE, or Spark will raise its own error)
            return table;
        }
        List<String[]> prefix = new ArrayList<>();
        for (String[] c : columns) {
            String value = values.get(c[0].toLowerCase(Locale.ROOT));
            if (value == null) {
                break;
            }
            prefix.add(new String[] {c[0], normalizeValue(value, c[1])});
        }
        return new Obj(table.db, table.table, prefix);
    }

    // ---- reads: from the analyzed plan, through PlanWalker ---------------------------------

    private List<Lock> reads(LogicalPlan analyzed, boolean partitions, boolean command) {
        List<Lock> out = new ArrayList<>();
        for (String line : walker.locks(analyzed, partitions, command).split("\n")) {
            if (line.isEmpty()) {
                continue;
            }
            String[] f = line.split("\t", -1);
            if (f[0].equals("V")) {
                String db = dec(f[1]);
                out.add(new Lock(new Obj(db.isEmpty() ? catalog.getCurrentDatabase() : db,
                    dec(f[2]), List.of()), "S"));
                continue;
            }
            if (f[0].equals("T")) {
                List<String> parts = new ArrayList<>();
                for (String p : dec(f[1]).split("\\.", -1)) {
                    if (!p.isEmpty()) {
                        parts.add(p);
                    }
                }
                parts.add(dec(f[2]));
                Obj obj = tableObject(parts);
                if (obj != null) {
                    out.add(new Lock(obj, "S"));
                }
                continue;
            }
            List<String> qualified = List.of(dec(f[1]).split("\\.", -1));
            Obj obj = new Obj(qualified.size() >= 2 ? qualified.get(qualified.size() - 2)
                : catalog.getCurrentDatabase(), last(qualified), List.of());
            out.add(new Lock(obj, "S"));
            List<String> cols = new ArrayList<>();
            Map<String, String> types = new HashMap<>();
            for (String item : f[2].split(",")) {
                if (item.isEmpty()) {
                    continue;
                }
                int colon = item.indexOf(':');
                String col = dec(colon < 0 ? item : item.substring(0, colon));
                cols.add(col);
                types.put(col.toLowerCase(Locale.ROOT),
                    dec(colon < 0 ? "" : item.substring(colon + 1)));
            }
            if (!partitions || cols.isEmpty()) {
                continue;
            }
            Map<String, Set<String>> pins = new HashMap<>();
            for (String item : f[3].split(",")) {
                if (item.isEmpty()) {
                    continue;
                }
                int eq = item.indexOf('=');
                String col = dec(eq < 0 ? item : item.substring(0, eq));
                Set<String> values = new HashSet<>();
                boolean unknownValue = false;
                for (String v : (eq < 0 ? "" : item.substring(eq + 1)).split("\\|", -1)) {
                    String value = literalValue(dec(v));
                    if (value == null) {
                        unknownValue = true;
                    } else {
                        values.add(value);
                    }
                }
                if (unknownValue || !types.containsKey(col)) {
                    continue;
                }
                Set<String> norm = new HashSet<>();
                for (String v : values) {
                    norm.add(normalizeValue(v, types.get(col)));
                }
                Set<String> prior = pins.get(col);
                if (prior != null) {
                    norm.retainAll(prior);
                }
                pins.put(col, norm);
            }
            List<String> listed = null;
            if (f[4].startsWith("+")) {
                listed = new ArrayList<>();
                for (String v : f[4].substring(1).split(",")) {
                    if (!v.isEmpty()) {
                        listed.add(dec(v));
                    }
                }
            }
            for (Obj p : expandLazily(obj, cols, pins, listed)) {
                out.add(new Lock(p, "S"));
            }
        }
        return out;
    }

    private List<Obj> expandLazily(Obj table, List<String> cols, Map<String, Set<String>> pins,
                                   List<String> listed) {
        if (listed == null && !allPinned(cols, pins)) {
            listed = partitionNames(tableMetadata(table.db, table.table));
        }
        return expand(table, cols, pins, listed == null ? new ArrayList<>() : listed);
    }

    private static boolean allPinned(List<String> cols, Map<String, Set<String>> pins) {
        long combos = 1;
        for (String c : cols) {
            Set<String> values = pins.get(c.toLowerCase(Locale.ROOT));
            if (values == null) {
                return false;
            }
            combos *= values.size();
        }
        return combos <= MAX_PINNED;
    }

    /** Partitions to lock: every pinned combination, else existing ones matching the pins. */
    private static List<Obj> expand(Obj table, List<String> cols, Map<String, Set<String>> pins,
                                    List<String> listing) {
        List<Obj> out = new ArrayList<>();
        if (allPinned(cols, pins)) {
            List<List<String[]>> combos = new ArrayList<>();
            combos.add(new ArrayList<>());
            for (String c : cols) {
                List<List<String[]>> next = new ArrayList<>();
                for (List<String[]> prefix : combos) {
                    for (String v : new TreeSet<>(pins.get(c.toLowerCase(Locale.ROOT)))) {
                        List<String[]> longer = new ArrayList<>(prefix);
                        longer.add(new String[] {c, v});
                        next.add(longer);
                    }
                }
                combos = next;
            }
            for (List<String[]> spec : combos) {
                out.add(new Obj(table.db, table.table, spec));
            }
            return out;
        }
        for (String pname : listing) {
            List<String[]> spec = new ArrayList<>();
            boolean match = true;
            for (String comp : pname.split("/", -1)) {
                int eq = comp.indexOf('=');
                String k = unescapePathName(eq < 0 ? comp : comp.substring(0, eq));
                String v = unescapePathName(eq < 0 ? "" : comp.substring(eq + 1));
                spec.add(new String[] {k, v});
                Set<String> pinned = pins.get(k.toLowerCase(Locale.ROOT));
                if (pinned != null && !pinned.contains(v)) {
                    match = false;
                }
            }
            if (match) {
                out.add(new Obj(table.db, table.table, spec));
            }
        }
        return out;
    }

    /** {@code 'a\'b'} -> {@code a'b}, {@code 12}/{@code 12L}/{@code 12S}/{@code 12Y} -> 12. */
    static String literalValue(String sql) {
        if (sql.length() >= 2 && sql.charAt(0) == '\'' && sql.charAt(sql.length() - 1) == '\'') {
            String body = sql.substring(1, sql.length() - 1);
            StringBuilder out = new StringBuilder();
            int i = 0;
            while (i < body.length()) {
                if (body.charAt(i) == '\\' && i + 1 < body.length()) {
                    out.append(body.charAt(i + 1));
                    i += 2;
                } else {
                    out.append(body.charAt(i));
                    i += 1;
                }
            }
            return out.toString();
        }
        String digits = sql;
        if (sql.endsWith("L") || sql.endsWith("S") || sql.endsWith("Y")) {
            digits = sql.substring(0, sql.length() - 1);
        }
        String unsigned = digits;
        while (unsigned.startsWith("-")) {
            unsigned = unsigned.substring(1);
        }
        if (!unsigned.isEmpty() && unsigned.chars().allMatch(Character::isDigit)) {
            BigInteger n = pyInt(digits);
            return n == null ? null : n.toString();
        }
        return null;
    }

    /** A partition value as Spark stores it: {@code hr='01'} on an int column is hr=1. */
    static String normalizeValue(String value, String type) {
        if (INTEGRAL.contains(type)) {
            BigInteger n = pyInt(value.strip());
            return n == null ? value : n.toString();
        }
        return value;
    }

    /** Python's int(text) for base-10 text: optional sign, digits, single underscores. */
    private static BigInteger pyInt(String text) {
        String t = text.strip();
        int start = 0;
        boolean negative = false;
        if (t.startsWith("+") || t.startsWith("-")) {
            negative = t.charAt(0) == '-';
            start = 1;
        }
        String body = t.substring(start);
        if (body.isEmpty() || body.startsWith("_") || body.endsWith("_") || body.contains("__")) {
            return null;
        }
        StringBuilder digits = new StringBuilder();
        for (int i = 0; i < body.length(); i++) {
            char c = body.charAt(i);
            if (c == '_') {
                continue;
            }
            int d = Character.digit(c, 10);
            if (d < 0) {
                return null;
            }
            digits.append((char) ('0' + d));
        }
        BigInteger n = new BigInteger(digits.toString());
        return negative ? n.negate() : n;
    }

    // ---- names and the catalog ---------------------------------------------------------------

    private List<String> ident(LogicalPlan node) {
        String name = node.nodeName();
        scala.collection.Seq<String> parts = PlanWalker.nameParts(node);
        if (parts != null) {
            return strings(parts);
        }
        if (name.equals("SubqueryAlias")) {
            return ident(((org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias) node)
                .child());
        }
        if (name.startsWith("CurrentNamespace")) {
            List<String> out = new ArrayList<>();
            out.add(catalog.getCurrentDatabase());
            return out;
        }
        return new ArrayList<>();
    }

    /** A table's object from its name parts; null for temporary views and non-tables. The
     *  catalog part of a three-part name is dropped: all catalogs share one lock namespace. */
    private Obj tableObject(List<String> parts) {
        if (parts == null || parts.isEmpty()) {
            return null;
        }
        if (parts.size() == 1) {
            if (catalog.getTempView(parts.get(0)).isDefined()) {
                return null;
            }
            return new Obj(catalog.getCurrentDatabase(), parts.get(0), List.of());
        }
        return new Obj(parts.get(parts.size() - 2), last(parts), List.of());
    }

    private CatalogTable tableMetadata(String db, String table) {
        try {
            return catalog.getTableMetadata(new org.apache.spark.sql.catalyst.TableIdentifier(
                table, scala.Option.apply(db)));
        } catch (Exception e) {
            throw sneaky(e);
        }
    }

    /** (name, type) of a catalog table's partition columns, in order. */
    private static List<String[]> partitionSchema(CatalogTable table) {
        List<String[]> out = new ArrayList<>();
        for (StructField f : table.partitionSchema().fields()) {
            out.add(new String[] {f.name(), f.dataType().typeName()});
        }
        return out;
    }

    private List<String> partitionNames(CatalogTable table) {
        return strings(catalog.listPartitionNames(table.identifier(), scala.Option.empty()));
    }

    private String qualify(String path) {
        org.apache.hadoop.fs.Path target = new org.apache.hadoop.fs.Path(path);
        try {
            return target.getFileSystem(session.sparkContext().hadoopConfiguration())
                .makeQualified(target).toString();
        } catch (IOException e) {
            throw new IllegalStateException("zklock cannot resolve the path " + path + ": " + e);
        }
    }

    /** Catalog tables a write to {@code path} touches: at, below or above it. */
    private List<Obj> tablesAt(String path) {
        String target = rstripSlash(qualify(path));
        List<Obj> out = new ArrayList<>();
        ExternalCatalog external = catalog.externalCatalog();
        for (String db : strings(external.listDatabases())) {
            scala.collection.immutable.Seq<String> names = external.listTables(db);
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
                    out.add(new Obj(db, t.identifier().table(), List.of()));
                }
            }
        }
        return out;
    }

    private static String rstripSlash(String s) {
        int end = s.length();
        while (end > 0 && s.charAt(end - 1) == '/') {
            end--;
        }
        return s.substring(0, end);
    }

    // ---- small helpers ---------------------------------------------------------------------

    private static String nodeName(LogicalPlan plan) {
        String name = plan.nodeName();
        while (name.endsWith("$")) {
            name = name.substring(0, name.length() - 1);
        }
        return name;
    }

    private static String last(List<String> parts) {
        return parts.get(parts.size() - 1);
    }

    private static List<Lock> one(Obj obj, String mode) {
        List<Lock> out = new ArrayList<>();
        out.add(new Lock(obj, mode));
        return out;
    }

    private static List<String> strings(scala.collection.Seq<?> seq) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < seq.size(); i++) {
            out.add(String.valueOf(seq.apply(i)));
        }
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

    private static String dec(String s) {
        return URLDecoder.decode(s, StandardCharsets.UTF_8);
    }

    private static String firstLine(Throwable e) {
        String text = e.getMessage() == null ? "" : e.getMessage().strip();
        if (text.isEmpty()) {
            return e.getClass().getSimpleName();
        }
        return text.split("\\R", 2)[0];
    }

    // ---- lock objects and normalisation (zklock/objects.py, zklock/lockrequest.py) ----------

    /** A bad lock object name: objects.py's InvalidLockObject. */
    static final class InvalidObject extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final String whole;
        final String reason;

        InvalidObject(String whole, String reason) {
            super("invalid lock object " + pyRepr(whole) + ": " + reason, null, false, false);
            this.whole = whole;
            this.reason = reason;
        }

        /** The refusal line: OBJECT TAB a JSON array [name, reason] (one line whatever the
         *  name holds), from which Python raises objects.py's InvalidLockObject. */
        String line() {
            return "OBJECT\t[" + json(whole) + "," + json(reason) + "]";
        }
    }

    /** A JSON string literal (ASCII only, so it survives any transport on one line). */
    static String json(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7E) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    private static final class Bad extends Exception {
        private static final long serialVersionUID = 1L;

        Bad(String reason) {
            super(reason, null, false, false);
        }
    }

    static final int MAX_IDENTIFIER = 128;
    static final int MAX_COMPONENT = 767;
    static final int MAX_DEPTH = 64;

    /** A database, table or partition, named as objects.py names it. */
    static final class Obj {
        final String db;
        final String table;                 // null for a database
        final List<String[]> partition;     // (key, value) pairs, values unescaped
        private final String name;

        Obj(String db, String table, List<String[]> partition) {
            String whole = table != null ? db + "." + table : db;
            this.db = identifier(db, "database", whole);
            this.table = table == null ? null : identifier(table, "table", whole);
            if (table == null && !partition.isEmpty()) {
                throw new InvalidObject(whole, "a partition needs a table");
            }
            if (partition.size() > MAX_DEPTH) {
                throw new InvalidObject(whole, "partition deeper than " + MAX_DEPTH + " levels");
            }
            List<String[]> spec = new ArrayList<>();
            StringBuilder name = new StringBuilder(this.db);
            if (this.table != null) {
                name.append('.').append(this.table);
            }
            String sep = "/";
            for (String[] kv : partition) {
                String k = identifier(kv[0], "partition key", whole);
                String v = kv[1];
                if (v.isEmpty()) {
                    throw new InvalidObject(whole, "empty value for partition key " + pyRepr(k));
                }
                String component = escapePathName(k) + "=" + escapePathName(v);
                if (component.length() > MAX_COMPONENT) {
                    throw new InvalidObject(whole, "partition component " + k + "=... is "
                        + component.length() + " characters escaped (max " + MAX_COMPONENT + ")");
                }
                spec.add(new String[] {k, v});
                name.append(sep).append(component);
            }
            this.partition = spec;
            this.name = name.toString();
        }

        String name() {
            return name;
        }

        /** The database, the table and each partition prefix, outermost first. */
        List<Obj> parents() {
            List<Obj> out = new ArrayList<>();
            if (table == null) {
                return out;
            }
            out.add(new Obj(db, null, List.of()));
            for (int d = 0; d < partition.size(); d++) {
                out.add(new Obj(db, table, partition.subList(0, d)));
            }
            return out;
        }

        /** lockrequest.py's key of the parents: (db, table, partition[:-1]). */
        String parentKey() {
            StringBuilder key = new StringBuilder(db).append('.').append(table);
            for (int d = 0; d < partition.size() - 1; d++) {
                key.append('/').append(escapePathName(partition.get(d)[0])).append('=')
                   .append(escapePathName(partition.get(d)[1]));
            }
            return key.toString();
        }
    }

    static final class Lock {
        final Obj obj;
        final String mode;

        Lock(Obj obj, String mode) {
            this.obj = obj;
            this.mode = mode;
        }
    }

    /** lockrequest.py's normalize: parents in S, duplicates merged (X wins), sorted by name. */
    static List<Lock> normalize(List<Lock> locks) {
        Map<String, Lock> wanted = new HashMap<>();
        Set<String> seenParents = new HashSet<>();
        for (Lock l : locks) {
            if (l.obj.table != null && seenParents.add(l.obj.parentKey())) {
                for (Obj parent : l.obj.parents()) {
                    add(wanted, new Lock(parent, "S"));
                }
            }
            add(wanted, l);
        }
        TreeMap<String, Lock> sorted = new TreeMap<>(LockPlanner::compareCodePoints);
        sorted.putAll(wanted);
        return new ArrayList<>(sorted.values());
    }

    private static void add(Map<String, Lock> wanted, Lock l) {
        if (l.mode.equals("X") || !wanted.containsKey(l.obj.name())) {
            wanted.put(l.obj.name(), l);
        }
    }

    /** Python's string order (by code point), which Java's UTF-16 order is not. */
    static int compareCodePoints(String a, String b) {
        int i = 0;
        int j = 0;
        while (i < a.length() && j < b.length()) {
            int ca = a.codePointAt(i);
            int cb = b.codePointAt(j);
            if (ca != cb) {
                return Integer.compare(ca, cb);
            }
            i += Character.charCount(ca);
            j += Character.charCount(cb);
        }
        return Integer.compare(a.length() - i, b.length() - j);
    }

    private static String identifier(String text, String part, String whole) {
        try {
            return checkedIdentifier(text, part);
        } catch (Bad e) {
            throw new InvalidObject(whole, e.getMessage());
        }
    }

    private static String checkedIdentifier(String text, String part) throws Bad {
        String name = stripBackticks(text.strip()).strip();
        if (name.isEmpty()) {
            throw new Bad("empty " + part + " name");
        }
        if (name.equals(".") || name.equals("..")) {
            throw new Bad(part + " name " + pyRepr(name) + " is not allowed");
        }
        if (name.codePointCount(0, name.length()) > MAX_IDENTIFIER) {
            throw new Bad(part + " name is " + name.codePointCount(0, name.length())
                + " characters long (max " + MAX_IDENTIFIER + ")");
        }
        for (int i = 0; i < name.length(); ) {
            int ch = name.codePointAt(i);
            i += Character.charCount(ch);
            String s = new String(Character.toChars(ch));
            if (ch == '/') {
                throw new Bad("'/' inside " + part + " name " + pyRepr(name));
            }
            if (zkForbidden(ch) || !isPrintable(ch)) {
                throw new Bad("control character " + pyRepr(s) + " in " + part + " name "
                    + pyRepr(name));
            }
            if (".@=%".indexOf(ch) >= 0 || isPySpace(ch)) {
                throw new Bad("character " + pyRepr(s) + " not allowed in " + part + " name "
                    + pyRepr(name));
            }
        }
        name = name.toLowerCase(Locale.ROOT);
        if (name.startsWith("read-") || name.startsWith("write-")) {
            throw new Bad(part + " name " + pyRepr(name)
                + " may not start with 'read-' or 'write-' (lock node names)");
        }
        return name;
    }

    private static String stripBackticks(String s) {
        int start = 0;
        int end = s.length();
        while (start < end && s.charAt(start) == '`') {
            start++;
        }
        while (end > start && s.charAt(end - 1) == '`') {
            end--;
        }
        return s.substring(start, end);
    }

    /** Characters ZooKeeper's PathUtils refuses (objects.py's _zk_forbidden). */
    private static boolean zkForbidden(int c) {
        return c == 0 || (c >= 0x01 && c <= 0x1F) || (c >= 0x7F && c <= 0x9F)
            || (c >= 0xD800 && c <= 0xF8FF) || c >= 0xFFF0;
    }

    /** Python's str.isprintable for one character. */
    private static boolean isPrintable(int c) {
        if (c == ' ') {
            return true;
        }
        int t = Character.getType(c);
        return t != Character.CONTROL && t != Character.FORMAT && t != Character.SURROGATE
            && t != Character.PRIVATE_USE && t != Character.UNASSIGNED
            && t != Character.LINE_SEPARATOR && t != Character.PARAGRAPH_SEPARATOR
            && t != Character.SPACE_SEPARATOR;
    }

    private static boolean isPySpace(int c) {
        return Character.isWhitespace(c) || Character.isSpaceChar(c)
            || (c >= 0x1C && c <= 0x1F) || c == 0x85;
    }

    /** objects.py's escape_path_name: Hive's %XX, and %uXXXXXX for what ZooKeeper refuses. */
    static String escapePathName(String value) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < value.length(); ) {
            int c = value.codePointAt(i);
            i += Character.charCount(c);
            boolean escape = c <= 0x1F || "\"#%'*/:=?\\\u007f{[]^".indexOf(c) >= 0
                || (c >= 0x80 && c <= 0x9F) || (c >= 0xD800 && c <= 0xF8FF) || c >= 0xFFF0;
            if (!escape) {
                out.appendCodePoint(c);
            } else if (c < 0x100) {
                out.append(String.format("%%%02X", c));
            } else {
                out.append(String.format("%%u%06X", c));
            }
        }
        return out.toString();
    }

    /** objects.py's unescape_path_name. */
    static String unescapePathName(String text) {
        StringBuilder out = new StringBuilder();
        int i = 0;
        while (i < text.length()) {
            char c = text.charAt(i);
            if (c == '%') {
                if (i + 8 <= text.length() && text.charAt(i + 1) == 'u'
                        && isHex(text, i + 2, 6)) {
                    int code = Integer.parseInt(text.substring(i + 2, i + 8), 16);
                    if (code <= 0x10FFFF) {
                        out.appendCodePoint(code);
                    } else {
                        out.append(text, i, i + 8);
                    }
                    i += 8;
                    continue;
                }
                if (i + 3 <= text.length() && isHex(text, i + 1, 2)) {
                    out.append((char) Integer.parseInt(text.substring(i + 1, i + 3), 16));
                    i += 3;
                    continue;
                }
            }
            out.append(c);
            i++;
        }
        return out.toString();
    }

    private static boolean isHex(String s, int from, int n) {
        for (int i = from; i < from + n; i++) {
            char c = s.charAt(i);
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
                return false;
            }
        }
        return true;
    }

    /** Python's repr() of a string, enough for error messages to read the same. */
    static String pyRepr(String s) {
        char quote = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
        StringBuilder out = new StringBuilder().append(quote);
        for (int i = 0; i < s.length(); ) {
            int c = s.codePointAt(i);
            i += Character.charCount(c);
            if (c == quote || c == '\\') {
                out.append('\\').appendCodePoint(c);
            } else if (c == '\n') {
                out.append("\\n");
            } else if (c == '\r') {
                out.append("\\r");
            } else if (c == '\t') {
                out.append("\\t");
            } else if (c < 0x20 || c == 0x7F) {
                out.append(String.format("\\x%02x", c));
            } else if (!isPrintable(c)) {
                out.append(c < 0x100 ? String.format("\\x%02x", c)
                    : c < 0x10000 ? String.format("\\u%04x", c) : String.format("\\U%08x", c));
            } else {
                out.appendCodePoint(c);
            }
        }
        return out.append(quote).toString();
    }

    /** The table as loaded, sorted ("name TAB kind" lines, the write words, planner.py's sets
     *  and values): the parity test compares it with nodes.py and planner.py. */
    public static String nodeTable() {
        StringBuilder out = new StringBuilder();
        for (Map.Entry<String, String> e : new TreeMap<>(KINDS).entrySet()) {
            out.append(e.getKey()).append('\t').append(e.getValue()).append('\n');
        }
        out.append("words\t").append(String.join(",", WRITE_WORDS)).append('\n');
        for (Map.Entry<String, Set<String>> e : new TreeMap<>(SETS).entrySet()) {
            out.append("set\t").append(e.getKey()).append('\t')
               .append(String.join(",", new TreeSet<>(e.getValue()))).append('\n');
        }
        for (Map.Entry<String, String> e : new TreeMap<>(VALUES).entrySet()) {
            out.append("value\t").append(e.getKey()).append('\t').append(e.getValue())
               .append('\n');
        }
        return out.toString();
    }
}
