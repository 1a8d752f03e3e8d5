// zklock in Spark's engine: every command Spark executes runs holding the locks that
// LockPlanner.java gives it, whatever sent it (SQL, a DataFrameWriter, the catalog,
// pandas-on-Spark, a Spark Connect or Thrift client, Scala code). Hive's Driver does the same
// for every client of HiveServer2; zklock's Python proxy alone could not.
//
// Spark loads it by name, with zklock's jar on the application's class path:
//   spark.sql.extensions=zklock.EngineLocks
// (zklock.spark.configure(builder) sets both). It adds to every session:
//  - two analyzer rules that leave the parsed form of an analyzed command on it (the tag
//    PARSED, with the resolved plan as ANALYZED), because the planner's rules read statements
//    as parsed: one runs as early as the Spark line allows (before Spark resolves anything from
//    4.0 on; see AnalyzerHooks under adapters/) and remembers the plan each analysis starts
//    from (by AnalysisContext: a view's or subquery's nested analysis has its own), the other
//    runs once the plan is resolved and tags its root (Spark then keeps tags through
//    optimization);
//  - an analyzer rule refusing streaming writes into tables (StreamingWrites.java);
//  - a planner strategy, LockedCommands.java, that puts every command that may change data
//    or metadata under a LockedCommandExec.java, which holds the command's locks while it
//    runs (EngineGuard.java says how it gets them).
package zklock;

import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.analysis.AnalysisContext;
import org.apache.spark.sql.catalyst.analysis.AnalysisContext$;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.trees.TreeNodeTag;

import scala.runtime.BoxedUnit;

public final class EngineLocks implements scala.Function1<SparkSessionExtensions, BoxedUnit> {
    /** The plan an analysis started from (as parsed from Spark 4.0 on; after Spark's first
     *  resolution pass on 3.5), on the root of the command Spark analyzes from it. */
    static final TreeNodeTag<LogicalPlan> PARSED = new TreeNodeTag<>("zklock.parsed");
    /** What {@link #parsed} answered for a command, on the command. */
    private static final TreeNodeTag<LogicalPlan> READ = new TreeNodeTag<>("zklock.read");
    /** The resolved plan, on the same root: the planner reads it instead of analyzing again. */
    static final TreeNodeTag<LogicalPlan> ANALYZED = new TreeNodeTag<>("zklock.analyzed");

    /** The process's lock client installed through py4j (enforce(), a LockingSession). */
    private static volatile EngineLockClient client;
    /** The child process this JVM starts as its lock client where none is installed. */
    private static final ChildSupervisor CHILD = new ChildSupervisor();
    /** The lock clients of sessions a LockingSession wraps: each takes its session's locks
     *  with that LockingSession's manager and settings. */
    private static final Map<SparkSession, EngineLockClient> BOUND =
        java.util.Collections.synchronizedMap(new java.util.WeakHashMap<>());

    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        stagePerJob();
        AnalyzerHooks.first(extensions, new RememberParsed());
        extensions.injectPostHocResolutionRule(session -> new TagParsed());
        extensions.injectPostHocResolutionRule(session -> new StreamingWrites());
        extensions.injectPlannerStrategy(LockedCommands::new);
        return BoxedUnit.UNIT;
    }

    /** Every file write of every session of this application stages in a directory of its
     *  own (StagedCommitProtocol), whatever client sent it: the protocol becomes the
     *  application's default (its SparkConf, which each new session's SQL conf starts
     *  from), unless the application names another. Spark applies extensions with the
     *  application's SparkContext active, before it builds the session's state.
     *
     *  Spark checks that each new session can load the class named there, with its thread's
     *  class loader. A Thrift server's JDBC sessions run with Hive's session class loader,
     *  whose parent is the JVM's own class path, not Spark's loader of spark.jars: there
     *  zklock's jar must be on the driver's class path (spark.driver.extraClassPath, as
     *  `zklock spark thrift-server start` puts it), or every JDBC session would fail to
     *  open. Without it, the default is not set, and the server says why in one line. */
    private static void stagePerJob() {
        org.apache.spark.SparkContext sc =
            org.apache.spark.SparkContext$.MODULE$.getActive().getOrElse(() -> null);
        if (sc == null) {
            return;
        }
        boolean thriftServer = String.valueOf(System.getProperty("sun.java.command"))
            .contains("thriftserver.HiveThriftServer2");
        if (thriftServer && !onDriverClassPath()) {
            System.err.println("zklock: zklock's jar is not on this Thrift server's driver class"
                + " path (spark.driver.extraClassPath): its JDBC sessions cannot load zklock's"
                + " classes, and their writes do not stage per job (docs/deploy.md)");
            return;
        }
        sc.conf().setIfMissing(Protocol.COMMIT_PROTOCOL, Protocol.COMMIT_PROTOCOL_CLASS);
    }

    private static boolean onDriverClassPath() {
        try {
            Class.forName(Protocol.COMMIT_PROTOCOL_CLASS, false,
                ClassLoader.getSystemClassLoader());
            return true;
        } catch (ClassNotFoundException e) {
            return false;
        }
    }

    /** Make {@code next} the process's lock client (null: none), as {@code profile} says it
     *  is (ClientProfile.java; null for a client this returned before); returns the previous
     *  one. */
    public static synchronized EngineLockClient install(EngineLockClient next, String profile) {
        EngineLockClient previous = client;
        client = profiled(next, profile);
        return previous;
    }

    /** Make {@code next} the lock client of every statement {@code session} runs (null: the
     *  process's again), as {@code profile} says it is. One per session: false, and nothing
     *  changed, when {@code session} has one already (a second LockingSession would
     *  silently take the first one's statements). */
    public static synchronized boolean bind(SparkSession session, EngineLockClient next,
                                            String profile) {
        if (next == null) {
            BOUND.remove(session);
            return true;
        }
        return BOUND.putIfAbsent(session, profiled(next, profile)) == null;
    }

    private static EngineLockClient profiled(EngineLockClient next, String profile) {
        return next == null || profile == null ? next
            : new Profiled(next, ClientProfile.read(profile));
    }

    /** A py4j lock client with its profile, known while it lives: a dead one cannot be
     *  asked. Kept beside it, as a proxy's hashCode and equals would call into its Python. */
    private static final class Profiled implements EngineLockClient {
        final EngineLockClient client;
        final ClientProfile profile;

        Profiled(EngineLockClient client, ClientProfile profile) {
            this.client = client;
            this.profile = profile;
        }

        @Override
        public String acquire(String request) {
            return client.acquire(request);
        }

        @Override
        public String release(String handle, boolean failed) {
            return client.release(handle, failed);
        }

        @Override
        public String verify(String request) {
            return client.verify(request);
        }
    }

    /** The policy for a command without a lock rule for {@code session}'s statements
     *  ({@link #setting}). */
    static String unknownStatements(SparkSession session) {
        return setting(session, Protocol.UNKNOWN_STATEMENTS);
    }

    /** The value of {@code setting}, one the engine reads (config.py's ENGINE_SETTINGS), for
     *  {@code session}'s statements: its conf's and its lock client's, by
     *  docs/configuration.md's precedence (ClientProfile.resolve), else the environment's,
     *  else the default (Protocol.Setting.check). The child's profile is known once it has
     *  started: before, the conf decides. */
    static String setting(SparkSession session, Protocol.Setting setting) {
        String conf = session.conf().get(setting.key, null);
        ClientProfile profile = profile(session);
        return setting.check(profile == null ? conf : profile.resolve(setting.key, conf));
    }

    /** Has a LockingSession bound a lock client to {@code session}? */
    static boolean bound(SparkSession session) {
        return BOUND.containsKey(session);
    }

    /** The profile of {@code session}'s lock client, without starting one; null when none
     *  is known. */
    private static ClientProfile profile(SparkSession session) {
        EngineLockClient bound = BOUND.get(session);
        EngineLockClient chosen = bound != null ? bound : client;
        if (chosen != null) {
            return chosen instanceof Profiled ? ((Profiled) chosen).profile : null;
        }
        return CHILD.profile();
    }

    /** Does {@code session} plan its commands through zklock's strategy? Not merely whether
     *  spark.sql.extensions names this class: Spark skips an extension it cannot load, and a
     *  session made over an existing SparkContext may carry the setting without it. */
    public static boolean guards(org.apache.spark.sql.SparkSession session) {
        scala.collection.Iterator<?> strategies =
            session.sessionState().planner().extraPlanningStrategies().iterator();
        while (strategies.hasNext()) {
            if (strategies.next() instanceof LockedCommands) {
                return true;
            }
        }
        return false;
    }

    /** Does this Spark's DataFrameWriter.saveAsTable drop an overwritten table before it runs
     *  any command (Spark 3.5, 4.0)? Then no engine hook sees the drop, and zklock's Python
     *  locks the whole call itself (zklock/spark/saveastable.py). */
    public static boolean saveAsTableDropsFirst() {
        return SaveAsTable.DROPS_FIRST;
    }

    /** Spark 3.5 and 4.0's {@code df.write.saveAsTable(table)}, locked whole before Spark
     *  starts (zklock/spark/saveastable.py calls it): X on the table and on the catalog tables
     *  at its path (the call's {@code path} option, else the one set on {@code writer}), S on
     *  what {@code ds} reads, held until {@link Held#close}. The commands the call runs find
     *  themselves covered. Refused, denied or lost as any statement is (EngineRefusal). One
     *  py4j call: the writer's options are read here, not through py4j reflection. */
    public static Held lockSaveAsTable(SparkSession session, String table, String path,
                                       Object writer, org.apache.spark.sql.Dataset<?> ds) {
        List<String> paths = new java.util.ArrayList<>();
        if (path != null) {
            paths.add(path);
        }
        paths.addAll(pathOption(writer));
        LockPlanner planner = new LockPlanner(session, unknownStatements(session));
        com.fasterxml.jackson.databind.JsonNode answer = LockAnswer.union(
            LockAnswer.union(EngineGuard.answer(planner.planWrite(table, null)),
                EngineGuard.answer(planner.planPaths(paths))),
            EngineGuard.answer(planner.planDataFrame(ds)));
        String statement = "saveAsTable " + table;
        return new Held(EngineGuard.enterCall(session, answer, "saveAsTable", statement),
            "saveAsTable");
    }

    /** A block zklock's Python holds in a classic session (LockingSession.holding, a SQL
     *  script Spark runs statement by statement): the locks of {@code answer} (the planner's
     *  answer, as JSON), taken by {@code session}'s lock client as a statement's are, and held
     *  until {@link Held#close}. A statement the thread runs in the block is covered where
     *  the block's locks cover it, and refused where they do not (EngineGuard.enterBlock).
     *  Refused, denied or lost as any statement is (EngineRefusal). */
    public static Held hold(SparkSession session, String answer, String statement) {
        return new Held(EngineGuard.enterBlock(session, EngineGuard.answer(answer), statement),
            statement);
    }

    /** The {@code path} option set on a DataFrameWriter ({@code option("path", p)}): its
     *  {@code extraOptions} field (Spark 3.5 and 4.0), which no public method returns. */
    private static List<String> pathOption(Object writer) {
        for (Class<?> c = writer.getClass(); c != null; c = c.getSuperclass()) {
            try {
                java.lang.reflect.Field field = c.getDeclaredField("extraOptions");
                field.setAccessible(true);
                scala.Option<?> found = (scala.Option<?>) ((scala.collection.Map<String, ?>)
                    field.get(writer)).get("path");
                return found.isDefined() ? java.util.Collections.singletonList(
                    String.valueOf(found.get())) : java.util.Collections.emptyList();
            } catch (NoSuchFieldException e) {
                // a subclass: look in its parent
            } catch (ReflectiveOperationException | RuntimeException e) {
                throw EngineRefusal.refused("zklock: cannot read the path option of this"
                    + " saveAsTable (" + e + "); it does not run");
            }
        }
        return java.util.Collections.emptyList();
    }

    /** Locks a call holds (lockSaveAsTable), released by close. */
    public static final class Held {
        private final EngineGuard guard;
        private final String statement;

        Held(EngineGuard guard, String statement) {
            this.guard = guard;
            this.statement = statement;
        }

        /** The lock client's handle of the set (its LockSet, for a py4j client); null when
         *  nothing is held (nothing to lock, locking off, covered by a statement around). */
        public String handle() {
            return guard.handle();
        }

        /** Release them; {@code failure}: the call's error, as its first line (null: it
         *  succeeded). A loss while a successful call ran is thrown (EngineRefusal,
         *  ZKLOCK_LOCK_LOST). For a failed call, what to raise instead of its error: the
         *  loss, or the failed write (ZKLOCK_WRITE_FAILED) naming the table and what became
         *  of it, as a message; null to raise the call's own error. */
        public String close(String failure) {
            EngineRefusal refusal = guard.exit(statement,
                failure == null ? null : new IllegalStateException(failure));
            if (refusal != null && failure == null) {
                throw EngineRefusal.raise(refusal);
            }
            return refusal == null ? null : refusal.getCondition() + "\n" + refusal.getMessage();
        }
    }

    /** Is a lock client installed in this process? */
    public static boolean hasClient() {
        return client != null;
    }

    /** The lock client of {@code session}'s statements: the one bound to it, else the
     *  process's, else (unless spark.zklock.lockClient=none) a child process started now
     *  (ChildLockClient.java: a process that never imported zklock's Python, such as Spark's
     *  Thrift server); null when there is none. */
    static EngineLockClient client(SparkSession session) {
        EngineLockClient bound = BOUND.get(session);
        if (bound != null) {
            return bound;
        }
        EngineLockClient installed = client;
        if (installed != null || !ChildLockClient.wanted(session.sparkContext())) {
            return installed;
        }
        return CHILD.current(session.sparkContext());
    }

    /** {@code dead}, a py4j lock client, failed to answer (its Python's callback server is
     *  gone): it is no longer asked, so the next statement goes to the process's next lock
     *  client instead of failing on it forever. A child started after it must lock where
     *  it locked (ChildSupervisor.requireSpace): a child with other settings (the Spark
     *  conf's, where enforce() was given its own) would lock where no one else looks.
     *  {@code nodes}: the lock nodes of a statement it held, which the JVM now counts as
     *  lost, for the next child to delete rather than wait out the dead Python's session. */
    static synchronized void gone(EngineLockClient dead, List<String> nodes) {
        if (client == dead) {
            client = null;
        }
        BOUND.values().removeIf(c -> c == dead);
        String space = dead instanceof Profiled ? ((Profiled) dead).profile.space : null;
        CHILD.inherit(space, nodes);
        System.err.println("zklock: a lock client in this application's Python stopped"
            + " answering; the statements it held failed, and later statements go to the"
            + " next lock client" + (space == null ? "" : ", which must lock in " + space));
    }

    /** The child lock client's state (ChildSupervisor.status), as JSON. */
    public static String childStatus() {
        try {
            return new com.fasterxml.jackson.databind.ObjectMapper()
                .writeValueAsString(CHILD.status());
        } catch (java.io.IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The parsed form a plan was analyzed from: a whole SQL statement's text parsed again
     *  (StatementText: exact on every line, where the first rule's view is not), else what
     *  the first rule saw; null for a plan Spark built analyzed. */
    static LogicalPlan parsed(SparkSession session, LogicalPlan plan) {
        scala.Option<LogicalPlan> read = plan.getTagValue(READ);
        if (read.isDefined()) {
            return read.get();  // the strategy and the guard both ask: the text is parsed once
        }
        LogicalPlan statement = StatementText.of(session, plan);
        if (statement == null) {
            scala.Option<LogicalPlan> found = plan.getTagValue(PARSED);
            statement = found.isDefined() ? found.get() : null;
        }
        if (statement != null) {
            plan.setTagValue(READ, statement);
        }
        return statement;
    }

    /** The plan as it was resolved from its parsed form; null when not known. */
    static LogicalPlan analyzed(LogicalPlan plan) {
        scala.Option<LogicalPlan> found = plan.getTagValue(ANALYZED);
        return found.isDefined() ? found.get() : null;
    }

    /** The plans the analyses running on this thread started from, one per AnalysisContext
     *  (a view's or a subquery's analysis has a context of its own and runs inside its
     *  statement's), by identity; bounded, as a failed analysis never comes to TagParsed. */
    private static final ThreadLocal<Map<AnalysisContext, LogicalPlan>> ANALYZING =
        ThreadLocal.withInitial(IdentityHashMap::new);

    private static AnalysisContext context() {
        return AnalysisContext$.MODULE$.get();
    }

    /** Remembers the plan an analysis starts from (its first call in that analysis). */
    static final class RememberParsed extends Rule<LogicalPlan> {
        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            Map<AnalysisContext, LogicalPlan> started = ANALYZING.get();
            if (started.size() > 64) {
                started.clear();  // left by analyses that failed
            }
            started.putIfAbsent(context(), plan);
            return plan;
        }
    }

    /** Tags a resolved command with the plan its analysis started from. */
    static final class TagParsed extends Rule<LogicalPlan> {
        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            LogicalPlan parsed = ANALYZING.get().remove(context());
            if (LockedCommands.isStatement(plan) && parsed != null
                    && plan.getTagValue(PARSED).isEmpty()) {
                plan.setTagValue(PARSED, parsed);
                plan.setTagValue(ANALYZED, plan);
                if (!(plan instanceof Command)) {
                    tagCommands(plan, parsed, plan);
                }
            }
            return plan;
        }

        /** The commands inside a statement that is not one (a multi-insert's inserts) carry
         *  the whole statement: where Spark executes them one by one (Spark 3.5), each is
         *  planned, and locked, as the whole statement. */
        private static void tagCommands(LogicalPlan plan, LogicalPlan parsed,
                                        LogicalPlan analyzed) {
            scala.collection.Iterator<LogicalPlan> kids = plan.children().iterator();
            while (kids.hasNext()) {
                LogicalPlan kid = kids.next();
                if (kid instanceof Command) {
                    if (kid.getTagValue(PARSED).isEmpty()) {
                        kid.setTagValue(PARSED, parsed);
                        kid.setTagValue(ANALYZED, analyzed);
                    }
                } else {
                    tagCommands(kid, parsed, analyzed);
                }
            }
        }
    }
}
