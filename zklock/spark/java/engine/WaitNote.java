// Whom a locked statement waited for, in Spark's SQL tab: the text is part of zklock's plan
// node (LockedExec.java), after its name, and of its details (EXPLAIN FORMATTED). Spark's UI
// takes a plan's text when the execution starts, before the locks are granted, so once a
// statement that waited is granted them its execution's plan is posted again, as adaptive execution posts a plan it re-planned
// (SparkListenerSQLAdaptiveExecutionUpdate): the SQL tab shows the new text and, since the
// event log keeps the event, so does the History Server. The names come with the grant (the
// lock client read the holders of its last denial while the statement waited): the JVM adds
// no ZooKeeper round trip and no py4j crossing, and a statement that did not wait pays nothing.
package zklock.engine;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.execution.ExplainMode$;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.SQLExecution$;
import org.apache.spark.sql.execution.SparkPlanInfo;
import org.apache.spark.sql.execution.SparkPlanInfo$;
import org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate;
import org.apache.spark.sql.internal.SQLConf$;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

final class WaitNote {
    private static final Logger LOG = LoggerFactory.getLogger(WaitNote.class);

    private WaitNote() {
    }

    /** Post the plan of the SQL execution running here again, with its node's new text.
     *  Never throws: the statement holds its locks, and the text is for the UI only. */
    static void post(SparkContext sc) {
        try {
            Long id = ExecutionEnds.running(sc);
            if (id == null) {  // not a SQL execution of its own: no plan in the SQL tab
                return;
            }
            QueryExecution execution = SQLExecution$.MODULE$.getQueryExecution(id);
            SparkPlanInfo plan = SparkPlanInfo$.MODULE$.fromSparkPlan(execution.executedPlan());
            String text = execution.explainString(
                ExplainMode$.MODULE$.fromString(SQLConf$.MODULE$.get().uiExplainMode()));
            sc.listenerBus().post(new SparkListenerSQLAdaptiveExecutionUpdate(id, text, plan));
        } catch (RuntimeException | LinkageError e) {  // (a Spark without these classes)
            LOG.debug("zklock: could not name in Spark's UI whom the statement waited for", e);
        }
    }
}
