// Which partitions of a table a read takes S on, as Hive does: partitions pinned by '=' or IN
// on partition columns, in the filters that provably apply to the scan (PlanWalker finds
// them), locked one by one, existing or not; otherwise every existing partition matching the
// pinned prefix. Anything it cannot read (another expression, a literal of another type, a
// value that is none of its column's type) pins nothing: it locks more, never less.
package zklock.planner;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.spark.sql.catalyst.catalog.CatalogTable;
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
import org.apache.spark.sql.execution.datasources.PartitioningUtils;
import org.apache.spark.sql.types.StructField;

import scala.collection.Iterator;
import scala.collection.Seq;

final class PartitionPins {
    /** Literal types a pin is read from. */
    private static final Set<String> PIN_TYPES = NodeKinds.setOf(
        "string", "integer", "long", "short", "byte");
    /** Spark's integral type names: a partition value on them is stored as a number. */
    private static final Set<String> INTEGRAL = NodeKinds.setOf("byte", "short", "integer", "long");
    /** Above this many pinned partitions, lock what exists instead of the cross product. */
    static final int MAX_PINNED = 1000;

    private final SessionCatalog catalog;

    PartitionPins(SessionCatalog catalog) {
        this.catalog = catalog;
    }

    /** The partitions of {@code table} a scan with {@code output} under the conditions
     *  {@code conds} reads (as column/value specs); none for an unpartitioned table. */
    List<List<String[]>> scanned(CatalogTable table, Seq<Attribute> output,
                                 List<Expression> conds) {
        List<String[]> columns = partitionColumns(table);
        if (columns.isEmpty()) {
            return new ArrayList<>();
        }
        Map<Long, String> ids = new HashMap<>();
        for (int i = 0; i < output.size(); i++) {
            Attribute a = output.apply(i);
            for (String[] c : columns) {
                if (c[0].equalsIgnoreCase(a.name())) {
                    ids.put(a.exprId().id(), c[0].toLowerCase(Locale.ROOT));
                }
            }
        }
        Map<String, String> types = new HashMap<>();
        for (String[] c : columns) {
            types.put(c[0].toLowerCase(Locale.ROOT), c[1]);
        }
        Map<String, Set<String>> pins = new HashMap<>();
        for (Expression cond : conds) {
            for (Expression conj : conjuncts(cond)) {
                pin(conj, ids, types, pins);
            }
        }
        return partitionsToLock(table, columns, pins);
    }

    /** Every pinned combination, else the existing partitions that match the pins. */
    List<List<String[]>> partitionsToLock(CatalogTable table, List<String[]> columns,
                                          Map<String, Set<String>> pins) {
        List<List<String[]>> out = new ArrayList<>();
        if (allPinned(columns, pins)) {
            out.add(new ArrayList<>());
            for (String[] c : columns) {
                List<List<String[]>> longer = new ArrayList<>();
                for (List<String[]> prefix : out) {
                    for (String v : new TreeSet<>(pins.get(c[0].toLowerCase(Locale.ROOT)))) {
                        List<String[]> spec = new ArrayList<>(prefix);
                        spec.add(new String[] {c[0], v});
                        longer.add(spec);
                    }
                }
                out = longer;
            }
            return out;
        }
        for (Map<String, String> spec : existingPartitions(table)) {
            List<String[]> pairs = new ArrayList<>();
            boolean match = true;
            for (String[] c : columns) {
                String v = spec.get(c[0].toLowerCase(Locale.ROOT));
                if (v == null) {
                    break;
                }
                pairs.add(new String[] {c[0], v});
                Set<String> pinned = pins.get(c[0].toLowerCase(Locale.ROOT));
                if (pinned != null && !pinned.contains(v)) {
                    match = false;
                }
            }
            if (match) {
                out.add(pairs);
            }
        }
        return out;
    }

    private static boolean allPinned(List<String[]> columns, Map<String, Set<String>> pins) {
        long combos = 1;
        for (String[] c : columns) {
            Set<String> values = pins.get(c[0].toLowerCase(Locale.ROOT));
            if (values == null) {
                return false;
            }
            combos *= values.size();
        }
        return combos <= MAX_PINNED;
    }

    /** The partitions of a table as (lower-case column -> value) maps, unescaped by Spark. */
    List<Map<String, String>> existingPartitions(CatalogTable table) {
        List<Map<String, String>> out = new ArrayList<>();
        Seq<String> names =
            catalog.listPartitionNames(table.identifier(), scala.Option.empty());
        for (int i = 0; i < names.size(); i++) {
            Map<String, String> spec = new HashMap<>();
            Iterator<scala.Tuple2<String, String>> it =
                PartitioningUtils
                    .parsePathFragment(names.apply(i)).iterator();
            while (it.hasNext()) {
                scala.Tuple2<String, String> kv = it.next();
                spec.put(kv._1().toLowerCase(Locale.ROOT), kv._2());
            }
            out.add(spec);
        }
        return out;
    }

    /** (name, type name) of a catalog table's partition columns, in order. */
    static List<String[]> partitionColumns(CatalogTable table) {
        List<String[]> out = new ArrayList<>();
        for (StructField f : table.partitionSchema().fields()) {
            out.add(new String[] {f.name(), f.dataType().typeName()});
        }
        return out;
    }

    /** A partition value as Spark stores it for a column of {@code type} ({@code hr='01'} on
     *  an int column is hr=1); null when it is no value of that type, which ends a static
     *  prefix or drops a pin (locking more, never less). */
    static String normalizeValue(String value, String type) {
        if (!INTEGRAL.contains(type)) {
            return value;
        }
        String text = value.trim();
        int start = text.startsWith("-") || text.startsWith("+") ? 1 : 0;
        if (start == text.length()) {
            return null;
        }
        for (int i = start; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c < '0' || c > '9') {  // ASCII digits only, as Spark's own cast reads them
                return null;
            }
        }
        return new BigInteger(text).toString();
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

    /** Records the pin of {@code col = literal} or {@code col IN (literals)} on a partition
     *  column, intersected with earlier pins of the same column. */
    private static void pin(Expression e, Map<Long, String> ids, Map<String, String> types,
                    Map<String, Set<String>> pins) {
        String col;
        List<Expression> literals = new ArrayList<>();
        if (e instanceof EqualTo || e instanceof EqualNullSafe) {
            Expression l = ((BinaryComparison) e).left();
            Expression r = ((BinaryComparison) e).right();
            if (l instanceof Literal) {
                Expression t = l;
                l = r;
                r = t;
            }
            col = column(l, ids);
            literals.add(r);
        } else if (e instanceof In) {
            col = column(((In) e).value(), ids);
            Seq<Expression> list = ((In) e).list();
            for (int i = 0; i < list.size(); i++) {
                literals.add(list.apply(i));
            }
        } else {
            return;
        }
        if (col == null) {
            return;
        }
        Set<String> values = new TreeSet<>();
        for (Expression lit : literals) {
            String v = literal(lit);
            String normal = v == null ? null : normalizeValue(v, types.get(col));
            if (normal == null) {
                return;  // not a pin zklock can read: the column stays unpinned
            }
            values.add(normal);
        }
        values.retainAll(pins.getOrDefault(col, values));  // an earlier pin of the column too
        pins.put(col, values);
    }

    private static String column(Expression e, Map<Long, String> ids) {
        if (!(e instanceof AttributeReference)) {
            return null;
        }
        return ids.get(((AttributeReference) e).exprId().id());
    }

    /** A string or integral literal's value; null for anything else. */
    private static String literal(Expression e) {
        if (!(e instanceof Literal) || ((Literal) e).value() == null) {
            return null;
        }
        if (!PIN_TYPES.contains(e.dataType().typeName())) {
            return null;
        }
        return ((Literal) e).value().toString();
    }
}
