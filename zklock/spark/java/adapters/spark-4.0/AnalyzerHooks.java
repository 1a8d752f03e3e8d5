// Where an extension's rule can see a plan before Spark's analyzer resolves anything: from
// Spark 4.0 on, the hint resolution batch, which runs before resolution. Spark 4.0's
// Hive-enabled session (enableHiveSupport) builds its analyzer without extensions' hint rules,
// so the rule is also a resolution rule (it keeps the first plan an analysis shows it, so
// elsewhere the hint batch's wins); SQL commands are read from their text on every line
// (StatementText). An adapter: zklock/spark/jvm.py compiles the newest copy not newer than
// the installed Spark.
package zklock.adapters;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;

public final class AnalyzerHooks {
    private AnalyzerHooks() {
    }

    /** Run {@code rule} in every analysis, before the plan is resolved where Spark allows. */
    public static void first(SparkSessionExtensions extensions, Rule<LogicalPlan> rule) {
        extensions.injectHintResolutionRule(session -> rule);
        extensions.injectResolutionRule(session -> rule);
    }
}
