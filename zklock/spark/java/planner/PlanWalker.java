// The walks of a Catalyst plan that LockPlanner.java needs: every node it holds (the census),
// and what it reads (S on each permanent view, table and scanned partition).
//
// A read of a partitioned table takes S on each partition it scans, as Hive does: the walk
// finds the filters that provably apply to the scan (through projections, aliases, views,
// inner joins and other filters), and PartitionPins.java reads the partitions they pin.
// Anything else falls back to the conservative answer, which locks more, never less.
package zklock.planner;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.analysis.ResolvedIdentifier;
import org.apache.spark.sql.catalyst.analysis.ResolvedPersistentView;
import org.apache.spark.sql.catalyst.analysis.ResolvedTable;
import org.apache.spark.sql.catalyst.analysis.ResolvedTempView;
import org.apache.spark.sql.catalyst.analysis.UnresolvedIdentifier;
import org.apache.spark.sql.catalyst.analysis.UnresolvedNamespace;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTable;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTableOrView;
import org.apache.spark.sql.catalyst.analysis.UnresolvedView;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.HiveTableRelation;
import org.apache.spark.sql.catalyst.catalog.SessionCatalog;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.catalyst.trees.TreePattern$;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.execution.datasources.DataSource;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;

import scala.collection.Seq;

import zklock.Protocol.Mode;
import zklock.adapters.SqlScripts;

public final class PlanWalker {
    /** Nodes through which a parent's filter still constrains what a scan below reads. */
    private static final Set<String> FILTER_TRANSPARENT = NodeKinds.setOf(
        "Project", "SubqueryAlias", "View", "Filter", "Sort", "RepartitionByExpression",
        "Repartition", "ResolvedHint", "Distinct");

    /** One node of a plan: its class's simple name, whether it is a Command, and the name
     *  parts of the table or namespace it names (null when it names none). */
    static final class Node {
        final String name;
        final boolean command;
        final List<String> parts;

        Node(String name, boolean command, List<String> parts) {
            this.name = name;
            this.command = command;
            this.parts = parts;
        }
    }

    private final SessionCatalog catalog;
    private final PartitionPins pins;

    public PlanWalker(SessionCatalog catalog) {
        this.pins = new PartitionPins(catalog);
        this.catalog = catalog;
    }

    // ---- the census ------------------------------------------------------------------------

    /** Every node of {@code plan}: children, inner children (a command's query, a script's
     *  statements) and subquery expressions, so that a write nested anywhere is seen. */
    static List<Node> census(LogicalPlan plan) {
        List<Node> out = new ArrayList<>();
        census(plan, out);
        return out;
    }

    private static void census(LogicalPlan node, List<Node> out) {
        Seq<String> parts = nameParts(node);
        out.add(new Node(nodeName(node), node instanceof Command,
            parts == null ? null : strings(parts)));
        LogicalPlan statement = SqlScripts.statement(node);
        if (statement != null) {
            // a script's statement reports its statement's children as its own: walk the
            // statement itself
            census(statement, out);
            return;
        }
        Seq<LogicalPlan> kids = node.children();
        for (int i = 0; i < kids.size(); i++) {
            census(kids.apply(i), out);
        }
        Seq<?> extra = node.innerChildren();
        for (int i = 0; i < extra.size(); i++) {
            Object child = extra.apply(i);
            if (child instanceof LogicalPlan) {
                census((LogicalPlan) child, out);
            }
        }
        Seq<LogicalPlan> subs = node.subqueries();
        for (int i = 0; i < subs.size(); i++) {
            census(subs.apply(i), out);
        }
    }

    /** A plan node's class name as the node table writes it (a case object loses its '$'). */
    public static String nodeName(LogicalPlan plan) {
        String name = plan.getClass().getSimpleName();
        while (name.endsWith("$")) {
            name = name.substring(0, name.length() - 1);
        }
        return name;
    }

    /** The name parts of a node naming a table, view or namespace (Unresolved*); null for any
     *  other node. */
    static Seq<String> nameParts(LogicalPlan node) {
        if (node instanceof UnresolvedRelation) {
            return ((UnresolvedRelation) node)
                .multipartIdentifier();
        } else if (node instanceof UnresolvedTable) {
            return ((UnresolvedTable) node)
                .multipartIdentifier();
        } else if (node instanceof UnresolvedTableOrView) {
            return ((UnresolvedTableOrView) node)
                .multipartIdentifier();
        } else if (node instanceof UnresolvedView) {
            return ((UnresolvedView) node)
                .multipartIdentifier();
        } else if (node instanceof UnresolvedIdentifier) {
            return ((UnresolvedIdentifier) node)
                .nameParts();
        } else if (node instanceof UnresolvedNamespace) {
            return ((UnresolvedNamespace) node)
                .multipartIdentifier();
        }
        return null;
    }

    /** The catalog identifier of a name Spark resolved (a resolved identifier, table or view,
     *  or a DataSource V2 table); null for any other node. */
    static Identifier resolvedName(LogicalPlan node) {
        if (node instanceof ResolvedIdentifier) {
            return ((ResolvedIdentifier) node).identifier();
        } else if (node instanceof ResolvedTable) {
            return ((ResolvedTable) node).identifier();
        } else if (node instanceof ResolvedPersistentView) {
            return ((ResolvedPersistentView) node)
                .identifier();
        } else if (node instanceof ResolvedTempView) {
            return ((ResolvedTempView) node).identifier();
        } else if (node instanceof DataSourceV2Relation
                && ((DataSourceV2Relation) node).identifier().isDefined()) {
            return ((DataSourceV2Relation) node).identifier().get();
        }
        return null;
    }

    /** The session-catalog table of a relation Spark resolved (a file source or Hive table, or
     *  a view); null for any other node. */
    static TableIdentifier resolvedTable(LogicalPlan node) {
        if (node instanceof LogicalRelation && ((LogicalRelation) node).catalogTable().isDefined()) {
            return ((LogicalRelation) node).catalogTable().get().identifier();
        } else if (node instanceof HiveTableRelation) {
            return ((HiveTableRelation) node).tableMeta().identifier();
        } else if (node instanceof View) {
            return ((View) node).desc().identifier();
        }
        return null;
    }

    // ---- reads -----------------------------------------------------------------------------

    /** S on every permanent view, table and scanned partition an analyzed plan reads.
     *  {@code partitions} false: tables only (a view's definition); {@code command}: the plan
     *  is a command, whose query is in its inner children (CTAS, CREATE VIEW, CACHE TABLE). */
    List<LockAnswer.Target> reads(LogicalPlan plan, boolean partitions, boolean command) {
        List<LockAnswer.Target> out = new ArrayList<>();
        boolean inner = plan.containsPattern(TreePattern$.MODULE$.PLAN_EXPRESSION());
        visit(plan, new ArrayList<>(), out, partitions, inner, command);
        return out;
    }

    private void visit(LogicalPlan node, List<Expression> conds, List<LockAnswer.Target> out,
                       boolean partitions, boolean inner, boolean root) {
        if (scanned(node, conds, out, partitions)) {
            return;
        }
        if (node instanceof View && !((View) node).isTempView()) {
            out.add(table(((View) node).desc(), Mode.SHARED));
        }
        List<Expression> next = conditionsBelow(node, conds);
        Seq<LogicalPlan> kids = node.children();
        for (int i = 0; i < kids.size(); i++) {
            visit(kids.apply(i), next, out, partitions, inner, false);
        }
        if (inner || root) {
            Seq<?> extra = node.innerChildren();
            for (int i = 0; i < extra.size(); i++) {
                Object child = extra.apply(i);
                if (child instanceof LogicalPlan) {
                    visit((LogicalPlan) child, new ArrayList<>(), out, partitions, inner, false);
                }
            }
        }
    }

    /** Whether {@code node} is a scan of a table (a file relation, a Hive table, a stream's
     *  source table, a DataSource V2 table): then its S (and its partitions', under
     *  {@code conds}) is in {@code out}, and nothing below it is read. */
    private boolean scanned(LogicalPlan node, List<Expression> conds,
                            List<LockAnswer.Target> out, boolean partitions) {
        if (node instanceof LogicalRelation) {
            scala.Option<CatalogTable> t = ((LogicalRelation) node).catalogTable();
            if (t.isDefined()) {  // a path, not a catalog table: nothing to lock
                relation(t.get(), node.output(), conds, out, partitions);
            }
            return true;
        }
        if (node instanceof HiveTableRelation) {
            relation(((HiveTableRelation) node).tableMeta(), node.output(), conds, out, partitions);
            return true;
        }
        CatalogTable source = streamedTable(node);
        if (source != null) {  // a stream's source: the table whose files it reads
            out.add(table(source, Mode.SHARED));
            return true;
        }
        if (!(node instanceof DataSourceV2Relation)) {
            return false;
        }
        scala.Option<Identifier> id = ((DataSourceV2Relation) node).identifier();
        if (id.isDefined()) {
            String[] ns = id.get().namespace();
            out.add(new LockAnswer.Target(ns.length > 0 ? ns[ns.length - 1]
                : catalog.getCurrentDatabase(), id.get().name(), Collections.emptyList(),
                Mode.SHARED));
        }
        return true;
    }

    /** The conditions that still constrain what the scans below {@code node} read: its own
     *  filter's or inner join's added to {@code conds}, {@code conds} through a node that
     *  does not change which rows reach it, none below any other. */
    private static List<Expression> conditionsBelow(LogicalPlan node, List<Expression> conds) {
        if (node instanceof Filter) {
            List<Expression> next = new ArrayList<>(conds);
            next.add(((Filter) node).condition());
            return next;
        }
        if (node instanceof Join && "Inner".equals(((Join) node).joinType().toString())) {
            List<Expression> next = new ArrayList<>(conds);
            scala.Option<Expression> c = ((Join) node).condition();
            if (c.isDefined()) {
                next.add(c.get());
            }
            return next;
        }
        return FILTER_TRANSPARENT.contains(node.nodeName()) ? conds : new ArrayList<>();
    }

    /** The catalog table a streaming query reads as its source ({@code readStream.table}
     *  of a table of files: Spark's StreamingRelation, whose DataSource names it); null for
     *  any other node. Found by name and by the case class's first field, as Spark 4.1
     *  moved the class to another package. */
    private static CatalogTable streamedTable(LogicalPlan node) {
        if (!node.nodeName().equals("StreamingRelation") || node.productArity() == 0
                || !(node.productElement(0) instanceof DataSource)) {
            return null;
        }
        scala.Option<CatalogTable> table = ((DataSource) node.productElement(0)).catalogTable();
        return table.isDefined() ? table.get() : null;
    }

    /** A catalog table (or view) as a lock target. */
    LockAnswer.Target table(CatalogTable table, String mode) {
        scala.Option<String> db = table.identifier().database();
        return new LockAnswer.Target(db.isDefined() ? db.get() : catalog.getCurrentDatabase(),
            table.identifier().table(), Collections.emptyList(), mode);
    }

    private void relation(CatalogTable table, Seq<Attribute> output,
                          List<Expression> conds, List<LockAnswer.Target> out,
                          boolean partitions) {
        LockAnswer.Target whole = table(table, Mode.SHARED);
        out.add(whole);
        if (!partitions) {
            return;
        }
        for (List<String[]> spec : pins.scanned(table, output, conds)) {
            out.add(new LockAnswer.Target(whole.db, whole.table, spec, Mode.SHARED));
        }
    }

    static List<String> strings(Seq<?> seq) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < seq.size(); i++) {
            out.add(String.valueOf(seq.apply(i)));
        }
        return out;
    }
}
