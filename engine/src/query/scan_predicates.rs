//! Each conjunct of a Parquet scan's predicate evaluated once.
//!
//! The events scan gets its filters twice. The provider takes them from the logical plan
//! (for file pruning and the scan's predicate) and declares them inexact, so a
//! `FilterExec` stays above; DataFusion's physical filter pushdown then pushes that
//! `FilterExec`'s predicate into the same scan and appends it to the predicate already
//! there, without looking for repeats. Every conjunct became a second row filter that
//! decoded its columns again (`event = '$pageview' AND p_utm_source IS NOT NULL AND
//! event = '$pageview' AND p_utm_source IS NOT NULL` for the bench's utm_breakdown). This
//! rule, run after the last filter pushdown, keeps the first of each repeated conjunct.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::datasource::physical_plan::{FileScanConfig, FileSource, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_expr::utils::{conjunction, split_conjunction};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::{ExecutionPlan, PhysicalExpr};

#[derive(Debug, Default)]
pub(crate) struct DistinctScanPredicates;

/// `p`'s conjuncts without repeats, or `None` when it has none.
fn distinct(p: &Arc<dyn PhysicalExpr>) -> Option<Arc<dyn PhysicalExpr>> {
    let parts = split_conjunction(p);
    let mut kept: Vec<Arc<dyn PhysicalExpr>> = Vec::with_capacity(parts.len());
    for part in &parts {
        if !kept.iter().any(|k| k.as_ref() == part.as_ref()) {
            kept.push(Arc::clone(part));
        }
    }
    (kept.len() < parts.len()).then(|| conjunction(kept))
}

fn rewrite(exec: &DataSourceExec) -> Option<Arc<dyn ExecutionPlan>> {
    let (config, parquet) = exec.downcast_to_file_source::<ParquetSource>()?;
    let predicate = distinct(&parquet.filter()?)?;
    let mut config: FileScanConfig = config.clone();
    config.file_source = Arc::new(parquet.with_predicate(predicate));
    Some(Arc::new(exec.clone().with_data_source(Arc::new(config))))
}

impl PhysicalOptimizerRule for DistinctScanPredicates {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(
            |p| match p.downcast_ref::<DataSourceExec>().and_then(rewrite) {
                Some(new) => Ok(Transformed::yes(new)),
                None => Ok(Transformed::no(p)),
            },
        )
        .data()
    }

    fn name(&self) -> &str {
        "DistinctScanPredicates"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::physical_plan::FileScanConfigBuilder;
    use datafusion::datasource::table_schema::TableSchema;
    use datafusion::execution::object_store::ObjectStoreUrl;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, col, lit};

    use super::*;

    fn predicate_of(plan: &Arc<dyn ExecutionPlan>) -> Vec<String> {
        let exec = plan.downcast_ref::<DataSourceExec>().unwrap();
        let (_, parquet) = exec.downcast_to_file_source::<ParquetSource>().unwrap();
        split_conjunction(&parquet.filter().unwrap())
            .into_iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn repeated_conjuncts_are_evaluated_once() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Int64, true),
        ]));
        let eq = |c: &str, v: i64| -> Arc<dyn PhysicalExpr> {
            Arc::new(BinaryExpr::new(
                col(c, &schema).unwrap(),
                Operator::Eq,
                lit(v),
            ))
        };
        let scan = |p: Arc<dyn PhysicalExpr>| -> Arc<dyn ExecutionPlan> {
            let source =
                ParquetSource::new(TableSchema::builder(schema.clone()).build()).with_predicate(p);
            DataSourceExec::from_data_source(
                FileScanConfigBuilder::new(ObjectStoreUrl::local_filesystem(), Arc::new(source))
                    .build(),
            )
        };
        let rule = DistinctScanPredicates;
        let options = ConfigOptions::default();

        // As the physical pushdown leaves it: the scan's own predicate, then the
        // FilterExec's same conjuncts appended.
        let twice = conjunction([eq("a", 1), eq("b", 2), eq("a", 1), eq("b", 2)]);
        let plan = rule.optimize(scan(twice), &options).unwrap();
        assert_eq!(predicate_of(&plan), ["a@0 = 1", "b@1 = 2"]);

        // Different conjuncts are all kept, in their order.
        let distinct = conjunction([eq("b", 2), eq("a", 1), eq("a", 3)]);
        let plan = rule.optimize(scan(distinct), &options).unwrap();
        assert_eq!(predicate_of(&plan), ["b@1 = 2", "a@0 = 1", "a@0 = 3"]);
    }
}
