// The locks of what a plan names, where its rules cannot plan it: a statement with commands
// zklock has no rule for (refused, or X on every table and database it names where
// zklock.unknown.statements=lock), and the reads of a statement Spark's analyzer rejects or
// that cannot be analyzed before it runs (S on every table it names and on each of that
// table's existing partitions). Both lock more, never less.
package zklock.planner;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;

import org.apache.spark.sql.catalyst.catalog.CatalogTable;

import zklock.Protocol;
import zklock.Protocol.Mode;
import zklock.planner.LockAnswer.Target;
import zklock.planner.LockPlanner.Plan;

final class NamedTargets {
    private final CatalogTargets names;
    private final PartitionPins pins;

    NamedTargets(CatalogTargets names, PartitionPins pins) {
        this.names = names;
        this.pins = pins;
    }

    /** Refuse a statement with unknown commands, or (policy {@code unknownStatements} "lock")
     *  take X on every table and database it names. */
    Plan conservative(List<PlanWalker.Node> census, List<String> unknown,
                      String unknownStatements) {
        String rules = String.join(", ", unknown);
        if (!Protocol.Choice.UNKNOWN_STATEMENTS_LOCK.equals(unknownStatements)) {
            throw LockAnswer.unsupported("zklock has no lock rule for " + rules + ", so the"
                + " statement was not run; SET zklock.unknown.statements=lock"
                + " (spark.zklock.unknown.statements) to lock every table it names in X"
                + " instead");
        }
        List<Target> specs = new ArrayList<>();
        for (PlanWalker.Node n : census) {
            if (n.parts == null || n.parts.isEmpty()) {
                continue;
            }
            Target t = n.name.equals("UnresolvedNamespace")
                ? Target.database(CatalogTargets.last(n.parts), Mode.EXCLUSIVE)
                : names.tableTarget(n.parts, Mode.EXCLUSIVE);
            if (t != null) {
                specs.add(t);
            }
        }
        List<String> notes = new ArrayList<>();
        notes.add("no lock rule for " + rules + ": X on every object it names"
            + " (unknown_statements=lock)");
        return Plan.command(specs, notes);
    }

    /** S on every table a plan names and on each of its existing partitions: the reads of a
     *  statement that cannot be analyzed before it runs (locks more, never less). */
    List<Target> reads(List<PlanWalker.Node> census) {
        List<Target> out = new ArrayList<>();
        for (PlanWalker.Node n : census) {
            if (!n.name.equals("UnresolvedRelation") || n.parts == null || n.parts.isEmpty()) {
                continue;
            }
            Target table = names.tableTarget(n.parts, Mode.SHARED);
            if (table == null) {
                continue;
            }
            out.add(table);
            CatalogTable meta = names.metadataOrNull(table);
            if (meta == null) {
                continue;  // no such table (yet): the table-level lock is all there is
            }
            List<String[]> columns = PartitionPins.partitionColumns(meta);
            if (!columns.isEmpty()) {
                for (List<String[]> spec : pins.partitionsToLock(meta, columns,
                        new HashMap<>())) {
                    out.add(new Target(table.db, table.table, spec, Mode.SHARED));
                }
            }
        }
        return out;
    }
}
