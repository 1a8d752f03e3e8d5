// Where an extension can see a plan before Spark's analyzer resolves anything. Spark 3.5 has
// no hint resolution hook (4.0 added it), and its resolution rules run after Spark's own have
// resolved the plan once (a persistent CREATE VIEW is already the CreateViewCommand a
// temporary view also becomes). So on 3.5 a command that came from SQL is read from its text
// (StatementText). A command built without SQL (a DataFrameWriter's), or one part of a
// statement (each insert of a multi-insert), is read as the first resolution rule saw it,
// its names often resolved, and is refused where the planner cannot name what it writes.
// (The one analyzed command that is harmless or not by how it was written, CreateViewCommand,
// is always a whole statement.) An adapter: zklock/spark/jvm.py compiles the newest copy not
// newer than the installed Spark.
package zklock;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;

final class AnalyzerHooks {
    private AnalyzerHooks() {
    }

    /** Run {@code rule} in every analysis, as early as this Spark allows. */
    static void first(SparkSessionExtensions extensions, Rule<LogicalPlan> rule) {
        extensions.injectResolutionRule(session -> rule);
    }

    /** The statement {@code command} was analyzed from, read again from its text; null when
     *  it has none (see StatementText). */
    static LogicalPlan statement(SparkSession session, LogicalPlan command) {
        return StatementText.of(session, command);
    }
}
