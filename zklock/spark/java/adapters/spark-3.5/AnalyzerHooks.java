// Where an extension's rule can see a plan before Spark's analyzer resolves anything: Spark
// 3.5 has no such hook (4.0 added the hint resolution batch), so the rule runs with the
// resolution rules, after Spark's own have resolved the plan once (a persistent CREATE VIEW is
// already the CreateViewCommand a temporary view also becomes). SQL commands are read from
// their text instead (StatementText); a command built without SQL is read as this rule saw
// it, its names often resolved, and refused where the planner cannot name what it writes.
// An adapter: zklock/spark/jvm.py compiles the newest copy not newer than the installed Spark.
package zklock.adapters;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;

public final class AnalyzerHooks {
    private AnalyzerHooks() {
    }

    /** Run {@code rule} in every analysis, as early as this Spark allows. */
    public static void first(SparkSessionExtensions extensions, Rule<LogicalPlan> rule) {
        extensions.injectResolutionRule(session -> rule);
    }
}
