// A statement that names a table that does not exist waits for the table's X holder before
// Spark says so. zklock plans a query's locks from its analysed plan, and Spark's analysis
// fails on a missing table before any lock is asked for: a reader that came while a step
// replaced the table (dbt's `drop table` + `create table as select` under a session's LOCK
// TABLE, SessionLocks.java) would be told "table not found", though the table was only
// being replaced. An analyzer rule, after Spark's own have tried to resolve the name: where
// the session catalog has no such table, it takes S on the name (waiting, as a statement
// waits, for the holder of X), gives it back, and resolves the name again; a table still
// missing is Spark's error, as before. Hive's compiler fails such a reader the same way,
// before its locks: this is where zklock departs from it.
//
// Only names in the session catalog that are not temporary views, outside a locked
// statement (whose own locks are checked where it runs), and only on the path of a name
// Spark could not resolve: a statement that names existing tables pays nothing.
package zklock.engine;

import java.util.HashMap;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.catalog.SessionCatalog;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import scala.collection.Seq;
import scala.runtime.AbstractPartialFunction;

import zklock.EngineRefusal;
import zklock.Protocol.Mode;
import zklock.planner.LockPlanner;

public final class MissingTables extends Rule<LogicalPlan> {
    private static final String SESSION_CATALOG = "spark_catalog";
    /** The option a name that waited carries: Spark's next pass of its resolution rules
     *  resolves it (a pass that changes nothing ends them), and it waits once. Read options
     *  of a catalog table's relation that no source knows are ignored. */
    private static final String WAITED = "zklock.waited";

    private final SparkSession session;

    public MissingTables(SparkSession session) {
        this.session = session;
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (plan.resolved()) {
            return plan;
        }
        return plan.resolveOperatorsUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
            @Override
            public boolean isDefinedAt(LogicalPlan node) {
                return node instanceof UnresolvedRelation
                    && missing((UnresolvedRelation) node) != null;
            }

            @Override
            public LogicalPlan apply(LogicalPlan node) {
                return waitedFor((UnresolvedRelation) node);
            }
        });
    }

    /** The table of the session catalog that {@code relation} names, which Spark's rules
     *  could not resolve; null for a name this rule leaves alone (another catalog's, a
     *  temporary view, a database that does not exist, or a name it marked already). */
    private TableIdentifier missing(UnresolvedRelation relation) {
        if (relation.isStreaming() || relation.options().containsKey(WAITED)) {
            return null;
        }
        Seq<String> parts = relation.multipartIdentifier();
        SessionCatalog catalog = session.sessionState().catalog();
        int n = parts.size();
        if (n == 3 ? !SESSION_CATALOG.equalsIgnoreCase(parts.apply(0))
                : n > 3 || n == 0 || !SESSION_CATALOG.equalsIgnoreCase(
                    session.sessionState().catalogManager().currentCatalog().name())) {
            return null;  // another catalog's name
        }
        if (n == 1 && catalog.getTempView(parts.apply(0)).isDefined()) {
            return null;
        }
        String db = n == 1 ? catalog.getCurrentDatabase() : parts.apply(n - 2);
        return catalog.databaseExists(db)
            ? new TableIdentifier(parts.apply(n - 1), scala.Option.apply(db)) : null;
    }

    /** {@code relation}, marked to be resolved again (and not looked at again), once no one
     *  holds X on its name where its table is missing; when it is still missing, Spark then
     *  says so. A table that exists now was created since Spark looked (a step's CREATE
     *  runs): resolved again, its X holder is waited for where the statement takes its locks.
     *  (Resolved here, in an analysis of its own, it was not found: Spark's analysis of the
     *  statement keeps state for it.) */
    private LogicalPlan waitedFor(UnresolvedRelation relation) {
        TableIdentifier table = missing(relation);
        if (table == null || EnclosingLocks.inside(session.sparkContext())) {
            return relation;  // (inside a locked statement: its own locks are checked)
        }
        if (!session.sessionState().catalog().tableExists(table)) {
            if (LockClients.client(session) == null) {
                return relation;
            }
            JsonNode answer = StatementPlans.answer(new LockPlanner(session, null).planExplicit(
                table.quotedString(), null, null, Mode.SHARED));
            String name = "a read of " + table.unquotedString();
            EngineGuard guard = EngineEntry.enterCall(session, answer, name, name + ", missing");
            EngineRefusal lost = guard.exit(name, null);
            if (lost != null) {
                throw EngineRefusal.raise(lost);
            }
        }
        return marked(relation);
    }

    /** {@code relation}, marked to be resolved again, and not waited for again. */
    private static LogicalPlan marked(UnresolvedRelation relation) {
        Map<String, String> options = new HashMap<>(relation.options().asCaseSensitiveMap());
        options.put(WAITED, "true");
        return new UnresolvedRelation(relation.multipartIdentifier(),
            new CaseInsensitiveStringMap(options), relation.isStreaming());
    }
}
