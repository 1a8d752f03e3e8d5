// The file listings of what a statement reads, taken again once its locks are granted.
//
// Spark lists a file-based table's files once and keeps the listing for the session: in the
// relation it caches for the table (a table without partitions) and in the session's
// FileStatusCache (the partitions of a table the metastore tracks). Another application's
// write, under its own X lock, replaces or adds files and tells this session nothing; the
// next read here, under its S lock, then opens deleted files (FileNotFoundException) or
// misses new ones (a wrong answer, silently). Hive lists the files of each query when it
// runs, after its locks; zklock does the same for the relations of each locked statement.
package zklock;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;

public final class FreshListings {
    /** For py4j, which calls instance methods: {@link #refreshQuery}. */
    public FreshListings() {
    }

    /** List again the files of every relation a query reads, before it runs: those of its
     *  analysed plan (the session's cached relations) and of its optimised plan (the
     *  partitions pruned there). Returns how many listings were dropped. */
    public int refreshQuery(QueryExecution query) {
        return refresh(query.analyzed()) + refresh(query.optimizedPlan());
    }

    /** The same for a logical plan, its children and its subqueries. */
    public static int refresh(LogicalPlan plan) {
        int refreshed = 0;
        if (plan instanceof LogicalRelation
                && ((LogicalRelation) plan).relation() instanceof HadoopFsRelation) {
            ((HadoopFsRelation) ((LogicalRelation) plan).relation()).location().refresh();
            refreshed++;
        }
        scala.collection.Iterator<LogicalPlan> children = plan.children().iterator();
        while (children.hasNext()) {
            refreshed += refresh(children.next());
        }
        scala.collection.Iterator<LogicalPlan> subqueries = plan.subqueries().iterator();
        while (subqueries.hasNext()) {
            refreshed += refresh(subqueries.next());
        }
        return refreshed;
    }
}
