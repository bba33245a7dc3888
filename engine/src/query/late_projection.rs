//! Keeps the rebuilding of whole `properties` above a sort with a LIMIT.
//!
//! `SELECT * … ORDER BY timestamp DESC LIMIT 100` rebuilds each row's `properties` JSON
//! from the residual and ~80 typed columns (`hogql_properties`). The planner puts the sort
//! below that projection so only the 100 rows kept are rebuilt, but DataFusion's physical
//! projection pushdown moves any projection that narrows its input below a sort, whatever
//! it computes: at 10M events the events list then rebuilt 183 000 rows instead of 100
//! (1.67 s instead of 311 ms). Whether it happened depended on which operators happened to
//! sit between the two (a row filter of the project guard used to). This rule, run right
//! after DataFusion's last projection pushdown, puts such a projection back above the sort
//! (and the merge of sorted partitions above it), rewriting the sort's expressions onto the
//! projection's input. It runs before the pass that hands a TopK's dynamic filter to the
//! scan, so the new sort's filter is the one the scan prunes by.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{LexOrdering, PhysicalExpr, PhysicalSortExpr, ScalarFunctionExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;

/// DataFusion's physical optimizer rules with [`super::set_joins::SetJoins`] after join
/// selection, [`LateProjection`] after the last projection pushdown, and
/// [`super::yield_points::YieldPoints`] last.
pub(crate) fn physical_rules() -> Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> {
    let mut rules = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new().rules;
    let at = rules
        .iter()
        .rposition(|r| r.name() == "ProjectionPushdown")
        .map_or(rules.len(), |i| i + 1);
    rules.insert(at, Arc::new(LateProjection));
    let at = rules
        .iter()
        .position(|r| r.name() == "join_selection")
        .map_or(0, |i| i + 1);
    rules.insert(at, Arc::new(super::set_joins::SetJoins));
    rules.push(Arc::new(super::scan_predicates::DistinctScanPredicates));
    rules.push(Arc::new(super::set_joins::CompactBuildSide));
    rules.push(Arc::new(super::yield_points::YieldPoints));
    rules
}

/// Functions worth evaluating on the rows a LIMIT keeps only.
const LATE: &[&str] = &["hogql_properties"];

#[derive(Debug, Default)]
pub(crate) struct LateProjection;

fn is_late(e: &Arc<dyn PhysicalExpr>) -> bool {
    e.exists(|n| {
        Ok(n.downcast_ref::<ScalarFunctionExpr>()
            .is_some_and(|f| LATE.contains(&f.name())))
    })
    .unwrap_or(false)
}

/// `ordering` (over `p`'s output) over `p`'s input, when every column it reads is computed by
/// `p` without a late function.
fn onto_input(ordering: &LexOrdering, p: &ProjectionExec) -> Option<LexOrdering> {
    let mut out = Vec::new();
    for s in ordering.iter() {
        let expr = Arc::clone(&s.expr)
            .transform(|n| {
                let Some(c) = n.downcast_ref::<Column>() else {
                    return Ok(Transformed::no(n));
                };
                let e = &p.expr()[c.index()].expr;
                if is_late(e) {
                    return Err(datafusion::common::DataFusionError::Plan("late".into()));
                }
                Ok(Transformed::new(
                    Arc::clone(e),
                    true,
                    TreeNodeRecursion::Jump,
                ))
            })
            .data()
            .ok()?;
        out.push(PhysicalSortExpr::new(expr, s.options));
    }
    LexOrdering::new(out)
}

/// The projection under `sort`, when it computes a late function.
fn late_input(sort: &SortExec) -> Option<&ProjectionExec> {
    let p = sort.input().downcast_ref::<ProjectionExec>()?;
    (sort.fetch().is_some() && p.expr().iter().any(|e| is_late(&e.expr))).then_some(p)
}

fn sort_over(sort: &SortExec, p: &ProjectionExec) -> Option<SortExec> {
    Some(
        SortExec::new(onto_input(sort.expr(), p)?, Arc::clone(p.input()))
            .with_fetch(sort.fetch())
            .with_preserve_partitioning(sort.preserve_partitioning()),
    )
}

impl PhysicalOptimizerRule for LateProjection {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_down(|node| {
            let moved: Option<(Arc<dyn ExecutionPlan>, &ProjectionExec)> =
                if let Some(merge) = node.downcast_ref::<SortPreservingMergeExec>() {
                    merge
                        .input()
                        .downcast_ref::<SortExec>()
                        .and_then(|sort| Some((sort, late_input(sort)?)))
                        .and_then(|(sort, p)| {
                            let sort = sort_over(sort, p)?;
                            let merge = SortPreservingMergeExec::new(
                                onto_input(merge.expr(), p)?,
                                Arc::new(sort),
                            )
                            .with_fetch(merge.fetch());
                            Some((Arc::new(merge) as Arc<dyn ExecutionPlan>, p))
                        })
                } else if let Some(sort) = node.downcast_ref::<SortExec>() {
                    late_input(sort).and_then(|p| {
                        Some((Arc::new(sort_over(sort, p)?) as Arc<dyn ExecutionPlan>, p))
                    })
                } else {
                    None
                };
            match moved {
                Some((sorted, p)) => {
                    let top = ProjectionExec::try_new(p.expr().to_vec(), sorted)?;
                    Ok(Transformed::new(
                        Arc::new(top),
                        true,
                        TreeNodeRecursion::Jump,
                    ))
                }
                None => Ok(Transformed::no(node)),
            }
        })
        .data()
    }

    fn name(&self) -> &str {
        "hedgerow_late_projection"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::physical_plan::displayable;
    use datafusion::prelude::{SessionConfig, SessionContext, col};

    /// The physical plan of a sorted, limited `SELECT` of a rebuilt `properties`, one
    /// operator a line.
    async fn plan(ctx: SessionContext) -> Vec<String> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Int64, false),
            Field::new("properties", DataType::Utf8, true),
            Field::new("p_a", DataType::Utf8, true),
            Field::new("p_b", DataType::Utf8, true),
        ]));
        let part = |from: i64| {
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int64Array::from(vec![from, from + 1])),
                    Arc::new(StringArray::from(vec!["{}", "{}"])),
                    Arc::new(StringArray::from(vec!["x", "y"])),
                    Arc::new(StringArray::from(vec!["z", "w"])),
                ],
            )
            .unwrap()
        };
        let table = MemTable::try_new(schema.clone(), vec![vec![part(0)], vec![part(2)]]).unwrap();
        let df = ctx
            .read_table(Arc::new(table))
            .unwrap()
            .sort(vec![col("ts").sort(false, false)])
            .unwrap()
            .limit(0, Some(1))
            .unwrap()
            .select(vec![
                col("ts"),
                crate::hogql::property::rebuild_properties(
                    col("properties"),
                    vec![("a".into(), col("p_a")), ("b".into(), col("p_b"))],
                )
                .alias("properties"),
            ])
            .unwrap();
        let rows = df.clone().collect().await.unwrap();
        assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
        let physical = df.create_physical_plan().await.unwrap();
        displayable(physical.as_ref())
            .indent(false)
            .to_string()
            .lines()
            .map(|l| l.trim().split(':').next().unwrap_or("").to_string())
            .collect()
    }

    fn session(rules: Option<Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>>>) -> SessionContext {
        let mut b = datafusion::execution::SessionStateBuilder::new()
            .with_config(SessionConfig::new().with_target_partitions(2))
            .with_default_features();
        if let Some(rules) = rules {
            b = b.with_physical_optimizer_rules(rules);
        }
        SessionContext::new_with_state(b.build())
    }

    #[tokio::test]
    async fn the_rebuild_stays_above_the_sort_that_limits_it() {
        // DataFusion alone moves the narrowing projection below the sort…
        let default = plan(session(None)).await;
        let sort = default.iter().position(|l| l == "SortExec").unwrap();
        let projection = default.iter().position(|l| l == "ProjectionExec").unwrap();
        assert!(projection > sort, "{default:?}");
        // …and with the rule it is evaluated on the rows the LIMIT keeps.
        let ours = plan(session(Some(physical_rules()))).await;
        assert_eq!(ours[0], "ProjectionExec", "{ours:?}");
        assert!(
            ours.iter().skip(1).all(|l| l != "ProjectionExec"),
            "{ours:?}"
        );
        assert!(ours.contains(&"SortExec".to_string()), "{ours:?}");
    }
}
