// A table a DataFrame is saved as (DataFrameWriter.saveAsTable: Spark 4.1's
// SaveAsV1TableCommand, or the v1 CreateTable with a query that Spark 4.0 runs for it): its
// description (name, location) and the query whose rows it gets (null for none).
package zklock.planner;

import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

public final class SavedTable {
    private final CatalogTable table;
    private final LogicalPlan query;

    public SavedTable(CatalogTable table, LogicalPlan query) {
        this.table = table;
        this.query = query;
    }

    CatalogTable table() {
        return table;
    }

    LogicalPlan query() {
        return query;
    }
}
