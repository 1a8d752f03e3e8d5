// zklock's plan walker, run inside Spark's JVM: one py4j call per plan instead of 20 to 30.
// zklock/spark/walker.py compiles it against the installed Spark's jars on first use and
// falls back to the Python walk in planner.py when no javac is available. Both produce
// the same locks; tests run both.
package zklock;

import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.HiveTableRelation;
import org.apache.spark.sql.catalyst.catalog.SessionCatalog;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.BinaryComparison;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.catalyst.trees.TreePattern$;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.types.StructField;

public final class PlanWalker {
    private static final Set<String> TRANSPARENT = Set.of(
        "Project", "SubqueryAlias", "View", "Filter", "Sort", "RepartitionByExpression",
        "Repartition", "ResolvedHint", "Distinct");
    private static final Set<String> PIN_TYPES = Set.of(
        "string", "integer", "long", "short", "byte");
    private static final int MAX_PINNED = 1000;

    private final SessionCatalog catalog;

    public PlanWalker(SessionCatalog catalog) {
        this.catalog = catalog;
    }

    /** One line per finding: V (view), T (v2 table), R (catalog relation, with pins). */
    public String locks(LogicalPlan plan, boolean partitions, boolean command) {
        StringBuilder out = new StringBuilder();
        boolean inner = plan.containsPattern(TreePattern$.MODULE$.PLAN_EXPRESSION());
        visit(plan, new ArrayList<>(), out, partitions, inner, command);
        return out.toString();
    }

    /** {@link #locks} for a DataFrame's analyzed plan (Spark caches it per DataFrame). */
    public String dataFrameLocks(org.apache.spark.sql.classic.Dataset<?> ds) {
        return locks(ds.queryExecution().analyzed(), true, false);
    }

    /** What spark.sql would return, from the QueryExecution zklock planned (no re-analysis). */
    public org.apache.spark.sql.classic.Dataset<org.apache.spark.sql.Row> run(
            org.apache.spark.sql.execution.QueryExecution qe) {
        org.apache.spark.sql.classic.SparkSession$.MODULE$.setActiveSession(qe.sparkSession());
        qe.assertAnalyzed();
        return new org.apache.spark.sql.classic.Dataset<org.apache.spark.sql.Row>(
            qe, org.apache.spark.sql.catalyst.encoders.RowEncoder$.MODULE$.encoderFor(
                qe.analyzed().schema()));
    }

    /**
     * Tag the thread's next jobs with the statement's query id and fencing token, and tell
     * zklock's committers which lock nodes must still exist at job commit (CommitFence.java;
     * null when there are none).
     */
    public void enter(org.apache.spark.api.java.JavaSparkContext jsc, String tag, String token,
                      String zookeeper, String nodes) {
        org.apache.spark.SparkContext sc = jsc.sc();
        sc.addJobTag(tag);
        sc.setLocalProperty("zklock.fencing.token", token);
        sc.setLocalProperty("zklock.fence.zookeeper", zookeeper);
        sc.setLocalProperty("zklock.fence.nodes", nodes);
    }

    public void exit(org.apache.spark.api.java.JavaSparkContext jsc, String tag) {
        org.apache.spark.SparkContext sc = jsc.sc();
        sc.removeJobTag(tag);
        sc.setLocalProperty("zklock.fencing.token", null);
        sc.setLocalProperty("zklock.fence.zookeeper", null);
        sc.setLocalProperty("zklock.fence.nodes", null);
    }

    /**
     * Every node of {@code plan}, one line each: its class's simple name, TAB, C for a
     * Catalyst Command or P for any other plan. The walk goes through children, inner
     * children (a command's query, a script's statements) and subquery expressions, so a
     * write nested anywhere is seen. The planner checks each name against its table.
     */
    public static String census(LogicalPlan plan) {
        StringBuilder out = new StringBuilder();
        census(plan, out);
        return out.toString();
    }

    /**
     * The name parts of a node naming a table, view or namespace (Unresolved*, or the
     * identifier of a CREATE); null for any other node. LockPlanner.java reads names with it.
     */
    static scala.collection.Seq<String> nameParts(LogicalPlan node) {
        if (node instanceof org.apache.spark.sql.catalyst.analysis.UnresolvedRelation) {
            return ((org.apache.spark.sql.catalyst.analysis.UnresolvedRelation) node)
                .multipartIdentifier();
        } else if (node instanceof org.apache.spark.sql.catalyst.analysis.UnresolvedTable) {
            return ((org.apache.spark.sql.catalyst.analysis.UnresolvedTable) node)
                .multipartIdentifier();
        } else if (node instanceof org.apache.spark.sql.catalyst.analysis.UnresolvedTableOrView) {
            return ((org.apache.spark.sql.catalyst.analysis.UnresolvedTableOrView) node)
                .multipartIdentifier();
        } else if (node instanceof org.apache.spark.sql.catalyst.analysis.UnresolvedView) {
            return ((org.apache.spark.sql.catalyst.analysis.UnresolvedView) node)
                .multipartIdentifier();
        } else if (node instanceof org.apache.spark.sql.catalyst.analysis.UnresolvedIdentifier) {
            return ((org.apache.spark.sql.catalyst.analysis.UnresolvedIdentifier) node)
                .nameParts();
        } else if (node instanceof org.apache.spark.sql.catalyst.analysis.UnresolvedNamespace) {
            return ((org.apache.spark.sql.catalyst.analysis.UnresolvedNamespace) node)
                .multipartIdentifier();
        }
        return null;
    }

    /** The name parts (encoded, joined by '.') of a node naming a table or namespace. */
    private static String identifier(LogicalPlan node) {
        scala.collection.Seq<String> parts = nameParts(node);
        if (parts == null) {
            return "";
        }
        List<String> encoded = new ArrayList<>();
        for (int i = 0; i < parts.size(); i++) {
            encoded.add(enc(parts.apply(i)));
        }
        return String.join(".", encoded);
    }

    private static void census(LogicalPlan node, StringBuilder out) {
        String name = node.getClass().getSimpleName();
        if (name.endsWith("$")) {
            name = name.substring(0, name.length() - 1);
        }
        out.append(name).append('\t')
           .append(node instanceof org.apache.spark.sql.catalyst.plans.logical.Command ? 'C' : 'P')
           .append('\t').append(identifier(node)).append('\n');
        if (node instanceof org.apache.spark.sql.catalyst.plans.logical.SingleStatement) {
            // a script's statement reports its statement's children as its own: walk the
            // statement itself
            census(((org.apache.spark.sql.catalyst.plans.logical.SingleStatement) node)
                .parsedPlan(), out);
            return;
        }
        scala.collection.Seq<LogicalPlan> kids = node.children();
        for (int i = 0; i < kids.size(); i++) {
            census(kids.apply(i), out);
        }
        scala.collection.Seq<?> extra = node.innerChildren();
        for (int i = 0; i < extra.size(); i++) {
            Object child = extra.apply(i);
            if (child instanceof LogicalPlan) {
                census((LogicalPlan) child, out);
            }
        }
        scala.collection.Seq<LogicalPlan> subs = node.subqueries();
        for (int i = 0; i < subs.size(); i++) {
            census(subs.apply(i), out);
        }
    }

    /**
     * The target of an analyzed file-source INSERT as "qualifiedName TAB col:type,... TAB
     * k=v,..." (static partition values), or "" for any other plan.
     */
    public String insertTarget(LogicalPlan plan) {
        if (!(plan instanceof org.apache.spark.sql.execution.datasources
                .InsertIntoHadoopFsRelationCommand)) {
            return "";
        }
        org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand cmd =
            (org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand) plan;
        if (cmd.catalogTable().isEmpty()) {
            return "";
        }
        CatalogTable table = cmd.catalogTable().get();
        List<String> cols = new ArrayList<>();
        for (StructField f : table.partitionSchema().fields()) {
            cols.add(enc(f.name()) + ":" + enc(f.dataType().typeName()));
        }
        List<String> spec = new ArrayList<>();
        scala.collection.Iterator<scala.Tuple2<String, String>> it =
            cmd.staticPartitions().iterator();
        while (it.hasNext()) {
            scala.Tuple2<String, String> kv = it.next();
            spec.add(enc(kv._1()) + "=" + enc(kv._2()));
        }
        return enc(table.qualifiedName()) + "\t" + String.join(",", cols) + "\t"
            + String.join(",", spec);
    }

    private void visit(LogicalPlan node, List<Expression> conds, StringBuilder out,
                      boolean partitions, boolean inner, boolean root) {
        String name = node.nodeName();
        if (node instanceof LogicalRelation) {
            scala.Option<CatalogTable> t = ((LogicalRelation) node).catalogTable();
            if (t.isDefined()) {
                relation(t.get(), node.output(), conds, out, partitions);
            }
            return;
        }
        if (node instanceof HiveTableRelation) {
            relation(((HiveTableRelation) node).tableMeta(), node.output(), conds, out, partitions);
            return;
        }
        if (node instanceof DataSourceV2Relation) {
            scala.Option<org.apache.spark.sql.connector.catalog.Identifier> id =
                ((DataSourceV2Relation) node).identifier();
            if (id.isDefined()) {
                out.append("T\t").append(enc(String.join(".", id.get().namespace())))
                   .append('\t').append(enc(id.get().name())).append('\n');
            }
            return;
        }
        if (node instanceof View && !((View) node).isTempView()) {
            CatalogTable desc = ((View) node).desc();
            scala.Option<String> db = desc.identifier().database();
            out.append("V\t").append(enc(db.isDefined() ? db.get() : ""))
               .append('\t').append(enc(desc.identifier().table())).append('\n');
        }
        List<Expression> next;
        if (node instanceof Filter) {
            next = new ArrayList<>(conds);
            next.add(((Filter) node).condition());
        } else if (node instanceof Join && "Inner".equals(((Join) node).joinType().toString())) {
            next = new ArrayList<>(conds);
            scala.Option<Expression> c = ((Join) node).condition();
            if (c.isDefined()) {
                next.add(c.get());
            }
        } else if (TRANSPARENT.contains(name)) {
            next = conds;
        } else {
            next = new ArrayList<>();
        }
        scala.collection.Seq<LogicalPlan> kids = node.children();
        for (int i = 0; i < kids.size(); i++) {
            visit(kids.apply(i), next, out, partitions, inner, false);
        }
        if (inner || root) {
            scala.collection.Seq<?> extra = node.innerChildren();
            for (int i = 0; i < extra.size(); i++) {
                Object child = extra.apply(i);
                if (child instanceof LogicalPlan) {
                    visit((LogicalPlan) child, new ArrayList<>(), out, partitions, inner, false);
                }
            }
        }
    }

    private void relation(CatalogTable table, scala.collection.Seq<Attribute> output,
                          List<Expression> conds, StringBuilder out, boolean partitions) {
        out.append("R\t").append(enc(table.qualifiedName())).append('\t');
        StructField[] fields = table.partitionSchema().fields();
        List<String> cols = new ArrayList<>();
        for (StructField f : fields) {
            cols.add(enc(f.name()) + ":" + enc(f.dataType().typeName()));
        }
        out.append(String.join(",", cols)).append('\t');
        if (!partitions || fields.length == 0) {
            out.append("\t-\n");
            return;
        }
        Map<Long, String> ids = new HashMap<>();
        for (int i = 0; i < output.size(); i++) {
            Attribute a = output.apply(i);
            for (StructField f : fields) {
                if (f.name().equalsIgnoreCase(a.name())) {
                    ids.put(a.exprId().id(), f.name().toLowerCase());
                }
            }
        }
        List<String> parts = new ArrayList<>();
        Map<String, Integer> sizes = new HashMap<>();
        for (Expression cond : conds) {
            for (Expression conj : conjuncts(cond)) {
                String[] got = pin(conj, ids);
                if (got != null) {
                    parts.add(got[0]);
                    int n = Integer.parseInt(got[1]);
                    sizes.merge(got[2], n, Math::min);
                }
            }
        }
        long combos = 1;
        boolean all = true;
        for (StructField f : fields) {
            Integer n = sizes.get(f.name().toLowerCase());
            if (n == null) {
                all = false;
            } else {
                combos *= Math.max(1, n);
            }
        }
        out.append(String.join(",", parts)).append('\t');
        if (all && combos <= MAX_PINNED) {
            out.append("-\n");
            return;
        }
        scala.collection.Seq<String> names =
            catalog.listPartitionNames(table.identifier(), scala.Option.empty());
        List<String> listed = new ArrayList<>();
        for (int i = 0; i < names.size(); i++) {
            listed.add(enc(names.apply(i)));
        }
        out.append("+").append(String.join(",", listed)).append('\n');
    }

    private static List<Expression> conjuncts(Expression e) {
        List<Expression> out = new ArrayList<>();
        if (e instanceof And) {
            out.addAll(conjuncts(((And) e).left()));
            out.addAll(conjuncts(((And) e).right()));
        } else {
            out.add(e);
        }
        return out;
    }

    /** One conjunct's pin as {"col=v|v", count, col}, or null when it pins nothing. */
    private static String[] pin(Expression e, Map<Long, String> ids) {
        String col;
        List<String> values = new ArrayList<>();
        if (e instanceof EqualTo || e instanceof EqualNullSafe) {
            Expression l = ((BinaryComparison) e).left();
            Expression r = ((BinaryComparison) e).right();
            if (l instanceof Literal) {
                Expression t = l;
                l = r;
                r = t;
            }
            col = column(l, ids);
            String v = literal(r);
            if (col == null || v == null) {
                return null;
            }
            values.add(enc(v));
        } else if (e instanceof In) {
            col = column(((In) e).value(), ids);
            if (col == null) {
                return null;
            }
            scala.collection.Seq<Expression> list = ((In) e).list();
            for (int i = 0; i < list.size(); i++) {
                String v = literal(list.apply(i));
                if (v == null) {
                    return null;
                }
                values.add(enc(v));
            }
        } else {
            return null;
        }
        return new String[] {enc(col) + "=" + String.join("|", values),
                             Integer.toString(values.size()), col};
    }

    private static String column(Expression e, Map<Long, String> ids) {
        if (!(e instanceof AttributeReference)) {
            return null;
        }
        return ids.get(((AttributeReference) e).exprId().id());
    }

    private static String literal(Expression e) {
        if (!(e instanceof Literal) || ((Literal) e).value() == null) {
            return null;
        }
        if (!PIN_TYPES.contains(e.dataType().typeName())) {
            return null;
        }
        return e.sql();
    }

    private static String enc(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8);
    }
}
