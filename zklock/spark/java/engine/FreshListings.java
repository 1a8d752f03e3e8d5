// The file listings of what a statement reads, taken again once its locks are granted.
//
// Spark lists a file-based table's files once and keeps the listing for the session: in the
// relation it caches for the table (a table without partitions) and in the session's
// FileStatusCache (the partitions of a table the metastore tracks). Another application's
// write, under its own X lock, replaces or adds files and tells this session nothing; the
// next read here, under its S lock, then opens deleted files (FileNotFoundException) or
// misses new ones (a wrong answer, silently). Hive lists the files of each query when it
// runs, after its locks; zklock does the same for the relations of each locked statement.
package zklock.engine;

import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;

public final class FreshListings {
    /** For py4j, which calls instance methods: {@link #refreshQuery}. */
    public FreshListings() {
    }

    /** List again the files of every relation a query reads, before it runs: those of its
     *  analysed plan (the session's cached relations) and of its optimised plan (the
     *  partitions pruned there), each listing once. Returns how many were listed again. */
    public int refreshQuery(QueryExecution query) {
        return refresh(query.analyzed(), query.optimizedPlan());
    }

    /** The same for logical plans, their children and their subqueries: a file index that
     *  several of them share (an analysed plan and its optimised one) is listed once. */
    public static int refresh(LogicalPlan... plans) {
        Set<FileIndex> indexes = Collections.newSetFromMap(new IdentityHashMap<>());
        for (LogicalPlan plan : plans) {
            collect(plan, indexes);
        }
        for (FileIndex index : indexes) {
            index.refresh();
        }
        return indexes.size();
    }

    private static void collect(LogicalPlan plan, Set<FileIndex> indexes) {
        if (plan instanceof LogicalRelation
                && ((LogicalRelation) plan).relation() instanceof HadoopFsRelation) {
            indexes.add(((HadoopFsRelation) ((LogicalRelation) plan).relation()).location());
        }
        scala.collection.Iterator<LogicalPlan> children = plan.children().iterator();
        while (children.hasNext()) {
            collect(children.next(), indexes);
        }
        scala.collection.Iterator<LogicalPlan> subqueries = plan.subqueries().iterator();
        while (subqueries.hasNext()) {
            collect(subqueries.next(), indexes);
        }
    }
}
