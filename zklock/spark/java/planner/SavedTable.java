// A table a DataFrame is saved as (DataFrameWriter.saveAsTable: Spark 4.1's
// SaveAsV1TableCommand, or the v1 CreateTable with a query that Spark 4.0 runs for it): its
// description (name, location) and the query whose rows it gets.
package zklock;

import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;

record SavedTable(CatalogTable table, LogicalPlan query) {
}
