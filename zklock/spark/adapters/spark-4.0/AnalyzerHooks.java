// Where an extension's rule can see a plan before Spark's analyzer resolves anything: from
// Spark 4.0 on, the hint resolution batch, which runs before resolution. An adapter:
// zklock/spark/jvm.py compiles the newest copy not newer than the installed Spark.
package zklock;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;

final class AnalyzerHooks {
    private AnalyzerHooks() {
    }

    /** Run {@code rule} in every analysis, before the plan is resolved. */
    static void first(SparkSessionExtensions extensions, Rule<LogicalPlan> rule) {
        extensions.injectHintResolutionRule(session -> rule);
    }

    /** The statement {@code plan} was analyzed from, read again from its text: never needed
     *  here (the rule above sees every plan as written), so null. */
    static LogicalPlan statement(SparkSession session, LogicalPlan plan) {
        return null;
    }
}
