// Whom a locked statement waited for, in Spark's SQL tab: the text is part of zklock's plan
// node (LockedExec.java), after its name, and of its details (EXPLAIN FORMATTED). Spark's UI takes a plan's text when the execution
// starts, before the locks are granted, so once a statement that waited is granted them its
// execution's plan is posted again, as adaptive execution posts a plan it re-planned
// (SparkListenerSQLAdaptiveExecutionUpdate): the SQL tab shows the new text and, since the
// event log keeps the event, so does the History Server. The names come with the grant
// (the lock client's last denial): no ZooKeeper round trip and no py4j crossing is added, and
// nothing at all for a statement that did not wait.
package zklock;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.execution.ExplainMode$;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.SQLExecution$;
import org.apache.spark.sql.execution.SparkPlanInfo;
import org.apache.spark.sql.execution.SparkPlanInfo$;
import org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate;
import org.apache.spark.sql.internal.SQLConf$;

final class WaitNote {
    private WaitNote() {
    }

    /** Whom the statement waited for, or "" when it did not wait. */
    static String of(EngineGuard guard) {
        return guard.holds() ? guard.waitedFor() : "";
    }

    /** Post the plan of the SQL execution running here again, with its node's new text. */
    static void post(SparkContext sc) {
        String id = sc.getLocalProperty(SQLExecution$.MODULE$.EXECUTION_ID_KEY());
        QueryExecution execution = id == null ? null
            : SQLExecution$.MODULE$.getQueryExecution(Long.parseLong(id));
        if (execution == null) {  // not a SQL execution of its own: no plan in the SQL tab
            return;
        }
        try {
            SparkPlanInfo plan = SparkPlanInfo$.MODULE$.fromSparkPlan(execution.executedPlan());
            String text = execution.explainString(
                ExplainMode$.MODULE$.fromString(SQLConf$.MODULE$.get().uiExplainMode()));
            sc.listenerBus().post(
                new SparkListenerSQLAdaptiveExecutionUpdate(Long.parseLong(id), text, plan));
        } catch (RuntimeException e) {
            // the UI keeps the text it had: the statement, under its locks, is not failed for it
            System.err.println("zklock: could not name in Spark's UI whom the statement waited for: "
                + e);
        }
    }
}
