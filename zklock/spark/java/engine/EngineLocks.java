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

    /** What zklock adds to Spark, by phase. Which lock client takes a statement's locks is
     *  LockClients.java's; what Python calls, EngineCalls.java's. */
    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        // the application: every file write stages in a directory of its own
        stagePerJob();
        // analysis: the parsed form and the resolved plan on each command, for the planner
        AnalyzerHooks.first(extensions, new RememberParsed());
        extensions.injectPostHocResolutionRule(session -> new TagParsed());
        // analysis: streaming writes into tables are refused (no lock bounds them)
        extensions.injectPostHocResolutionRule(session -> new StreamingWrites());
        // planning: every command and query under a node that holds its locks as it runs
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
