// zklock in Spark's engine: every command Spark executes runs holding the locks that
// LockPlanner.java gives it, whatever sent it (SQL, a DataFrameWriter, the catalog,
// pandas-on-Spark, a Spark Connect or Thrift client, Scala code). Hive's Driver does the same
// for every client of HiveServer2; zklock's Python proxy alone could not.
//
// Spark loads it by name, with zklock's jar on the application's class path:
//   spark.sql.extensions=zklock.EngineLocks
// (zklock.spark.configure(builder) sets both). This class is only the list of what it adds,
// by phase, as Iceberg's IcebergSparkSessionExtensions is, with no effect of its own beyond
// them (the application's default commit protocol is EnginePlugin's); each part is in the
// package of its concept (zklock.engine, zklock.commit):
//  - two analyzer rules that keep each command's parsed form on it (engine/ParsedForms.java),
//    because the planner's rules read statements as parsed;
//  - an analyzer rule putting each micro-batch of a streaming write under its locks
//    (stream/StreamingWrites.java);
//  - a planner strategy, LockedCommands.java, that puts every command that may change data
//    or metadata under a LockedCommandExec.java, which holds the command's locks while it
//    runs (EngineGuard.java says how it gets them).
// It stays in the package zklock with the other names users write in their conf.
package zklock;

import org.apache.spark.sql.SparkSessionExtensions;

import scala.runtime.BoxedUnit;

import zklock.adapters.AnalyzerHooks;
import zklock.engine.LockedCommands;
import zklock.engine.MissingTables;
import zklock.engine.ParsedForms;
import zklock.engine.SessionLockParser;
import zklock.stream.StreamingWrites;

public final class EngineLocks implements scala.Function1<SparkSessionExtensions, BoxedUnit> {
    /** What zklock adds to Spark, by phase. Which lock client takes a statement's locks is
     *  LockClients.java's; what Python calls, EngineCalls.java's. */
    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        // parsing: a session's own locks (LOCK TABLE ... UNLOCK TABLE), which Spark refuses
        extensions.injectParser((session, parser) -> SessionLockParser.wrap(parser));
        // analysis: the parsed form and the resolved plan on each command, for the planner
        AnalyzerHooks.first(extensions, new ParsedForms.RememberParsed());
        extensions.injectPostHocResolutionRule(session -> new ParsedForms.TagParsed());
        // analysis: a missing table's name waits for its X holder (a step replacing it)
        extensions.injectResolutionRule(MissingTables::new);
        // analysis: a streaming write's sink, one whose micro-batches each run under locks
        extensions.injectPostHocResolutionRule(StreamingWrites::new);
        // planning: every command and query under a node that holds its locks as it runs
        extensions.injectPlannerStrategy(LockedCommands::new);
        return BoxedUnit.UNIT;
    }
}
