// A command under zklock's engine extension: runs the command's physical plan (its child) while
// holding the command's locks (EngineGuard.java). It is a V2CommandExec so that Spark treats it
// as it treats its own commands: adaptive execution plans the child apart, and the command runs
// once, when its result is first asked for.
package zklock;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.datasources.v2.V2CommandExec;

public final class LockedCommandExec extends V2CommandExec {
    private static final long serialVersionUID = 1L;

    private final transient LogicalPlan command;
    private final SparkPlan child;
    /** The command's output, as the Scala 2.13 collection Spark 4 expects (and Spark 3.5's
     *  Scala 2.12 accepts): copied once. */
    private final scala.collection.immutable.Seq<Attribute> output;

    public LockedCommandExec(LogicalPlan command, SparkPlan child) {
        this.command = command;
        this.child = child;
        this.output = command.output().toList();
    }

    @Override
    public scala.collection.immutable.Seq<InternalRow> run() {
        EngineGuard guard = EngineGuard.enter(session(), command);
        String name = PlanWalker.nodeName(command);
        InternalRow[] rows;
        try {
            FreshListings.refresh(command);  // what it reads, as of its locks
            rows = child.executeCollect();
        } catch (Throwable e) {  // Scala code throws checked exceptions (SparkException) too
            EngineRefusal lost;
            try {
                lost = guard.exit(name, e);
            } catch (RuntimeException releaseFailed) {  // the command's own error comes first
                e.addSuppressed(releaseFailed);
                throw LockedCommandExec.<RuntimeException>rethrow(e);
            }
            if (lost != null) {  // its jobs were cancelled because the locks were lost
                throw lost;
            }
            throw LockedCommandExec.<RuntimeException>rethrow(e);
        }
        EngineRefusal lost = guard.exit(name, null);
        if (lost != null) {
            throw lost;
        }
        scala.collection.immutable.List<InternalRow> out =
            scala.collection.immutable.List$.MODULE$.empty();
        for (int i = rows.length - 1; i >= 0; i--) {
            out = out.$colon$colon(rows[i]);
        }
        return out;
    }

    @Override
    public scala.collection.immutable.Seq<Attribute> output() {
        return output;
    }

    @Override
    public scala.collection.immutable.Seq<SparkPlan> children() {
        return list(child);
    }

    // Spark passes the new children as a Scala 2.13 immutable IndexedSeq (Spark 4) or a 2.12
    // collection IndexedSeq (Spark 3.5): one of these two overrides Spark's method, the other
    // is never called.
    public SparkPlan withNewChildrenInternal(
            scala.collection.immutable.IndexedSeq<SparkPlan> newChildren) {
        return new LockedCommandExec(command, newChildren.apply(0));
    }

    public SparkPlan withNewChildrenInternal(scala.collection.IndexedSeq<SparkPlan> newChildren) {
        return new LockedCommandExec(command, newChildren.apply(0));
    }

    @Override
    public Object productElement(int n) {
        if (n == 0) {
            return command;
        }
        if (n == 1) {
            return child;
        }
        throw new IndexOutOfBoundsException(String.valueOf(n));
    }

    @Override
    public int productArity() {
        return 2;
    }

    @Override
    public boolean canEqual(Object other) {
        return other instanceof LockedCommandExec;
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException rethrow(Throwable e) throws E {
        throw (E) e;  // Spark's own exception, unchanged
    }

    static <T> scala.collection.immutable.Seq<T> list(T one) {
        return scala.collection.immutable.List$.MODULE$.<T>empty().$colon$colon(one);
    }
}
