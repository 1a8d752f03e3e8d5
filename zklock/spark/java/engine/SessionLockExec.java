// LOCK TABLE and UNLOCK TABLE as Spark runs them (SessionLocks.java): a command Spark runs
// eagerly, once, as it runs its own (a V2CommandExec), and shows in its SQL tab by its text.
package zklock.engine;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.datasources.v2.V2CommandExec;

import scala.collection.immutable.Seq;

public final class SessionLockExec extends V2CommandExec {
    private static final long serialVersionUID = 1L;

    private final String sql;

    public SessionLockExec(String sql) {
        this.sql = sql;
    }

    @Override
    public Seq<InternalRow> run() {
        SessionLocks.run(session(), sql);
        return scala.collection.immutable.List$.MODULE$.empty();
    }

    @Override
    public Seq<Attribute> output() {
        return scala.collection.immutable.List$.MODULE$.empty();
    }

    @Override
    public Seq<SparkPlan> children() {
        return scala.collection.immutable.List$.MODULE$.empty();
    }

    // Spark 4 passes a Scala 2.13 immutable IndexedSeq, Spark 3.5 a 2.12 collection one: one
    // of these overrides Spark's method. A leaf: no children to replace.
    public SparkPlan withNewChildrenInternal(
            scala.collection.immutable.IndexedSeq<SparkPlan> newChildren) {
        return this;
    }

    public SparkPlan withNewChildrenInternal(scala.collection.IndexedSeq<SparkPlan> newChildren) {
        return this;
    }

    @Override
    public Object productElement(int n) {
        if (n == 0) {
            return sql;
        }
        throw new IndexOutOfBoundsException(String.valueOf(n));
    }

    @Override
    public int productArity() {
        return 1;
    }

    @Override
    public boolean canEqual(Object other) {
        return other instanceof SessionLockExec;
    }
}
