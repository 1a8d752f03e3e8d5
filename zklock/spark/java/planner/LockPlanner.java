// zklock's lock planner: the S and X locks a Spark statement or DataFrame needs, from Spark's
// own plans. Hive's lock table, applied to Catalyst instead of Hive's compiler:
//
// * what a statement writes comes from the parsed plan, whose command nodes (InsertIntoStatement,
//   AddPartitions, DropTable ...) are the same whatever table format is behind them;
// * what it reads comes from the analyzed plan (PlanWalker.java), where views are expanded to
//   their base tables and CTEs, subqueries, joins and unions are all visible;
// * a dynamic-partition insert takes X on the table, or on its static prefix.
//
// It is the one planner: zklock's engine (EngineGuard.java) calls it for every statement,
// EXPLAIN LOCKS through py4j (zklock/spark/planner.py), a Spark Connect client through
// ConnectLockPlugin.java. Every entry point answers with a LockAnswer (the locks, or a
// refusal); Spark's own errors are thrown as Spark throws them. This class decides what a
// statement is (a query, one command, several, an unknown one) and combines the rules by
// statement kind: DataWrites.java (rows written), DdlWrites.java (DDL), ScriptPlans.java
// (EXECUTE IMMEDIATE, SQL scripts), with names resolved by CatalogTargets.java. What each
// plan node class means is NodeKinds.java.
package zklock.planner;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Supplier;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.CommandExecutionMode;

import scala.collection.Seq;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Mode;
import zklock.adapters.ExecuteImmediate;
import zklock.planner.LockAnswer.Refusal;
import zklock.planner.LockAnswer.Target;
import zklock.planner.NodeKinds.Kind;

public final class LockPlanner {
    /** Statements that define a view: their sources are locked at table level only. */
    private static final Set<String> VIEW_DDL = NodeKinds.setOf("CreateView", "AlterViewAs");
    /** Parsed roots of plain queries (SELECT ...): commands only if one is nested in them. */
    private static final Set<String> KNOWN_QUERIES = NodeKinds.setOf(
        "Project", "Aggregate", "Filter", "Sort", "GlobalLimit", "LocalLimit", "Union",
        "Distinct", "Join", "Window", "Intersect", "Except", "Offset", "Tail", "UnresolvedHint");
    /** Parsed nodes through which a nested statement is still run by Spark: a multi-insert is
     *  a Union of inserts, and WITH ... INSERT puts the insert below the CTE definitions. */
    private static final Set<String> STATEMENT_CONTAINERS = NodeKinds.setOf("Union", "UnresolvedWith");

    private final SparkSession session;
    private final PlanWalker walker;
    private final CatalogTargets names;
    private final NamedTargets named;
    private final DataWrites dataWrites;
    private final DdlWrites ddlWrites;
    private final ScriptPlans scripts;
    private volatile String unknownStatements;

    /** A planner on {@code session}; {@code unknownStatements} as {@link #setUnknownStatements}. */
    public LockPlanner(SparkSession session, String unknownStatements) {
        this.session = session;
        this.walker = new PlanWalker(session.sessionState().catalog());
        this.names = new CatalogTargets(session);
        this.named = new NamedTargets(names, new PartitionPins(session.sessionState().catalog()));
        this.dataWrites = new DataWrites(names, walker);
        this.ddlWrites = new DdlWrites(names);
        this.scripts = new ScriptPlans(session, this);
        setUnknownStatements(unknownStatements);
    }

    /** What a command without a lock rule gets: refuse (it does not run) or lock (X on every
     *  object it names); null: the setting's environment value, else its default. */
    public void setUnknownStatements(String policy) {
        this.unknownStatements = Protocol.UNKNOWN_STATEMENTS.check(policy);
    }

    // ---- entry points ------------------------------------------------------------------------

    /** The answer for {@code sql}: EXPLAIN LOCKS, and Spark Connect's plugin. */
    public String planSql(String sql, boolean strict) {
        return answered(() -> planParsed(parse(sql), strict, null).answer());
    }

    /** The answer for a plan not analyzed yet: the plan Spark Connect builds from a relation. */
    public String planPlan(LogicalPlan plan, boolean strict) {
        return answered(() -> planParsed(plan, strict, null).answer());
    }

    /** The answer for a command Spark is about to execute (zklock's engine extension): its
     *  parsed form and the analysis Spark made of it, so that it is not analyzed twice. */
    public String planCommand(LogicalPlan parsed, LogicalPlan analyzed) {
        return answered(() -> planParsed(parsed, true, analyzed).answer());
    }

    /** S on what an action on {@code ds} reads (Spark caches its analyzed plan). */
    public String planDataFrame(Dataset<?> ds) {
        return planQuery(ds.queryExecution().analyzed());
    }

    /** S on what a query reads, from its analyzed plan (views expanded, subqueries and CTEs
     *  visible): what zklock's engine takes before Spark executes it. */
    public String planQuery(LogicalPlan analyzed) {
        return answered(() -> LockAnswer.locks(false, walker.reads(analyzed, true, false),
            Collections.emptyList(), false));
    }

    /**
     * The object a write to {@code table} locks in X: the table, or its static
     * {@code partition} prefix (may be null); no targets for a temporary view. zklock's own
     * statements (LOCK TABLE, leases) name their objects with it.
     */
    public String planWrite(String table, Map<String, String> partition) {
        return answered(() -> {
            List<Target> specs = new ArrayList<>();
            Target target = names.tableTarget(table, Mode.EXCLUSIVE);
            if (target != null) {
                specs.add(names.staticPrefix(target, partition == null ? new HashMap<>() : partition));
            }
            return LockAnswer.locks(true, specs, new ArrayList<>(), false);
        });
    }

    /** The lock a session's LOCK TABLE or LOCK DATABASE names (engine/SessionLocks.java), in
     *  {@code mode}: the {@code database}, else the {@code table} or its static
     *  {@code partition} prefix, as {@link #planWrite} names it; refused for a temporary
     *  view, which no lock covers. */
    public String planExplicit(String table, Map<String, String> partition, String database,
                               String mode) {
        return answered(() -> {
            Target target;
            if (database != null) {
                target = Target.database(database, mode);
            } else {
                target = names.tableTarget(table, mode);
                if (target == null) {
                    throw LockAnswer.invalidArguments(table + " is a temporary view, not a"
                        + " table");
                }
                target = names.staticPrefix(target, partition == null ? new HashMap<>() : partition);
            }
            return LockAnswer.locks(true, Collections.singletonList(target), new ArrayList<>(),
                false);
        });
    }

    /** X on every catalog table stored at, above or below each of {@code paths}: a write
     *  there writes those tables (Spark 4.0's saveAsTable with a path option, locked whole by
     *  its LockingSession). */
    public String planPaths(List<String> paths) {
        return answered(() -> {
            List<Target> specs = new ArrayList<>();
            for (String path : paths) {
                specs.addAll(names.tablesAt(path));
            }
            return LockAnswer.locks(true, specs, new ArrayList<>(), false);
        });
    }

    /** Spark's ParseException when {@code sql} does not parse. */
    public void validate(String sql) {
        parse(sql);
    }

    /** The answer {@code planning} comes to, or the refusal it raised, as JSON. */
    private static String answered(Supplier<LockAnswer> planning) {
        try {
            return planning.get().toJson();
        } catch (Refusal r) {
            return LockAnswer.refused(r).toJson();
        }
    }

    // ---- one statement ----------------------------------------------------------------------

    /** A statement's locks, whether Spark runs it as a command (eagerly, in sql()) and what
     *  the planner noted. */
    static final class Plan {
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

        static Plan command(List<Target> targets, List<String> notes) {
            return new Plan(targets, true, notes);
        }

        LockAnswer answer() {
            return LockAnswer.locks(command, targets, notes, recheck, whole);
        }
    }

    /** The plan of the parsed statement {@code parsed}; {@code analyzedAlready} is Spark's
     *  analysis of it when it has one (else null: it is analyzed here). Not {@code strict}
     *  (EXPLAIN LOCKS, a script's statements), a statement Spark's analyzer rejects is planned
     *  from the names it gives, with a note. */
    Plan planParsed(LogicalPlan parsed, boolean strict, LogicalPlan analyzedAlready) {
        String name = PlanWalker.nodeName(parsed);
        if (NodeKinds.is(name, Kind.NO_LOCKS)) {
            return new Plan(new ArrayList<>(), true, new ArrayList<>());
        }
        if (name.equals("PlanWithUnresolvedIdentifier")) {
            throw LockAnswer.invalidArguments("zklock cannot tell which object"
                + " IDENTIFIER(<expression>) names before the statement runs; name it literally");
        }
        if (name.equals(ExecuteImmediate.NODE)) {
            return scripts.executeImmediate(parsed, false);
        }
        if (name.equals("CompoundBody")) {
            return scripts.script(parsed);
        }
        List<PlanWalker.Node> census = PlanWalker.census(parsed);
        List<Statement> statements = statements(parsed);
        refuseUnplannable(census, statements);
        List<String> unknown = unknown(census, statements);
        if (!unknown.isEmpty()) {
            return named.conservative(census, unknown, unknownStatements);
        }
        LogicalPlan analyzed = analyzedAlready;
        try {
            if (analyzed == null) {
                analyzed = session.sessionState().executePlan(parsed, CommandExecutionMode.SKIP())
                    .analyzed();
            }
        } catch (Exception e) {
            if (strict) {
                throw EngineRefusal.sneaky(e);
            }
            return unanalyzed(statements, census, e);
        }
        unknown = unknown(PlanWalker.census(analyzed), new ArrayList<>());
        if (!unknown.isEmpty()) {
            return named.conservative(census, unknown, unknownStatements);
        }
        return analyzedPlan(name, parsed, analyzed, statements);
    }

    /** The plan of a statement Spark's analyzer rejects ({@code e}), where it is not strict:
     *  its writes by their rules and S on everything it names (it may yet run: locks more). */
    private Plan unanalyzed(List<Statement> statements, List<PlanWalker.Node> census,
                            Exception e) {
        List<Target> specs = new ArrayList<>();
        for (Statement s : statements) {
            specs.addAll(writes(s.name, s.node));
            specs.addAll(ddlWrites.locationWrites(s.node));
        }
        specs.addAll(namedReads(census));
        List<String> notes = new ArrayList<>();
        notes.add("Spark's analyzer rejects this statement: " + LockAnswer.firstLine(e));
        return Plan.command(specs, notes);
    }

    /** The plan of {@code parsed} ({@code name}), analyzed as {@code analyzed}: what its
     *  {@code statements} write, and what it reads. */
    private Plan analyzedPlan(String name, LogicalPlan parsed, LogicalPlan analyzed,
                              List<Statement> statements) {
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
            if (s.node == parsed && s.name.equals("InsertIntoStatement")) {
                final Statement insert = s;
                specs.addAll(dataWrites.insertTarget(analyzed).map(CatalogTargets::one)
                    .orElseGet(() -> writes(insert.name, insert.node)));
            } else {
                specs.addAll(writes(s.name, s.node));
            }
            specs.addAll(ddlWrites.locationWrites(s.node));
        }
        specs.addAll(dataWrites.pathInserts(analyzed));
        specs.addAll(walker.reads(analyzed, !VIEW_DDL.contains(name), isCommand));
        Plan plan = new Plan(specs, isCommand, new ArrayList<>());
        for (Statement s : statements) {
            plan.recheck |= ddlWrites.existingCreate(s.node);
        }
        return plan;
    }

    /** What statement {@code parsed} ({@code name}) writes, by the rules of its kind. */
    private List<Target> writes(String name, LogicalPlan parsed) {
        return dataWrites.of(name, parsed).orElseGet(() -> ddlWrites.of(name, parsed));
    }

    /** Spark's parser; its ParseException (declared by Scala) is thrown unchanged. */
    LogicalPlan parse(String sql) {
        try {
            return session.sessionState().sqlParser().parsePlan(sql);
        } catch (Exception e) {
            throw EngineRefusal.sneaky(e);
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

    /** The statements Spark runs for {@code parsed}: the root, or each one below a
     *  multi-insert's Union or a CTE's definitions. Queries yield nothing. */
    private List<Statement> statements(LogicalPlan parsed) {
        String name = PlanWalker.nodeName(parsed);
        List<Statement> out = new ArrayList<>();
        if (STATEMENT_CONTAINERS.contains(name)) {
            Seq<LogicalPlan> kids = parsed.children();
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

    /** S on every table a plan names and on each of its existing partitions (NamedTargets). */
    List<Target> namedReads(List<PlanWalker.Node> census) {
        return named.reads(census);
    }
}
