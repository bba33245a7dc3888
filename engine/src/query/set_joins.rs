//! `x IN (SELECT …)` builds its set once, as ClickHouse builds it.
//!
//! DataFusion decorrelates an IN (or EXISTS) subquery into a semi or anti hash join and
//! picks the join's mode from statistics. The subquery's filter (`event = '$identify' AND
//! properties.$set.plan = 'pro'`) has no selectivity estimate, so the set looks as large as
//! the table and the join runs `Partitioned`: both sides are hash-repartitioned, and the
//! dynamic filter pushed into the probe scan becomes `CASE hash_repartition % n WHEN 0 THEN
//! … hash_lookup …` — every one of the table's rows hashed twice and split by branch. At 10M
//! events that filter alone was 348 ms of scan CPU in the bench's `plan_filter`.
//!
//! [`SetJoins`], run after DataFusion's join selection, builds every semi and anti join's
//! set side once (`CollectLeft`, the set on the build side): the probe side is not
//! repartitioned, and its dynamic filter is one `hash_lookup`. Measured alternated at 10M
//! (docs/architecture.md, "IN subqueries build their set once"): `plan_filter` 0.69× of
//! its CPU. A set the size of the table still works — it is built by one thread, from a
//! scan that ran on all of them, within the memory pool like any join's build side.
//!
//! [`CompactBuildSide`], run near the end, compacts the string views a collected build side
//! keeps: a filtered scan's batches point into whole decoded pages, and the join holds all
//! of them (58.5 MB for `plan_filter`'s 24 580 ids before, 1.3 MB after).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::common::{JoinType, Result};
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties,
    ReplaceChildrenOptions,
};
use futures::{Stream, StreamExt};

/// Semi and anti hash joins build their set side once.
#[derive(Debug, Default)]
pub(crate) struct SetJoins;

impl PhysicalOptimizerRule for SetJoins {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|p| {
            let Some(join) = p.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(p));
            };
            if *join.partition_mode() != PartitionMode::Partitioned || join.null_aware {
                return Ok(Transformed::no(p));
            }
            let joined = match join.join_type() {
                // The set is the right input: swap it onto the build side.
                JoinType::LeftSemi | JoinType::LeftAnti => {
                    join.swap_inputs(PartitionMode::CollectLeft)?
                }
                JoinType::RightSemi | JoinType::RightAnti => Arc::new(
                    join.builder()
                        .with_partition_mode(PartitionMode::CollectLeft)
                        .build()?,
                ),
                _ => return Ok(Transformed::no(p)),
            };
            Ok(Transformed::yes(joined))
        })
        .data()
    }

    fn name(&self) -> &str {
        "SetJoins"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// A collected hash join's build side compacts the string views it keeps.
#[derive(Debug, Default)]
pub(crate) struct CompactBuildSide;

impl PhysicalOptimizerRule for CompactBuildSide {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|p| {
            let Some(join) = p.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(p));
            };
            let left = join.left();
            if *join.partition_mode() != PartitionMode::CollectLeft
                || left.downcast_ref::<CompactViewsExec>().is_some()
                || !has_views(&left.schema())
            {
                return Ok(Transformed::no(p));
            }
            let left: Arc<dyn ExecutionPlan> = Arc::new(CompactViewsExec::new(Arc::clone(left)));
            let right = Arc::clone(join.right());
            Ok(Transformed::yes(Arc::clone(&p).replace_children(
                vec![left, right],
                ReplaceChildrenOptions::new(ChildrenPropertiesMode::Keep),
            )?))
        })
        .data()
    }

    fn name(&self) -> &str {
        "CompactBuildSide"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

fn is_view(t: &DataType) -> bool {
    matches!(t, DataType::Utf8View | DataType::BinaryView)
}

fn has_views(schema: &SchemaRef) -> bool {
    schema.fields().iter().any(|f| is_view(f.data_type()))
}

/// Passes its input's batches on, with each string-view column copied into buffers of its
/// own when the buffers it points into are mostly other rows' bytes.
#[derive(Debug, Clone)]
pub(crate) struct CompactViewsExec {
    input: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
}

impl CompactViewsExec {
    pub(crate) fn new(input: Arc<dyn ExecutionPlan>) -> Self {
        let properties = Arc::clone(input.properties());
        Self { input, properties }
    }
}

impl DisplayAs for CompactViewsExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompactViewsExec")
    }
}

impl ExecutionPlan for CompactViewsExec {
    fn name(&self) -> &str {
        "CompactViewsExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(Self::new(children.swap_remove(0))))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        Ok(Box::pin(CompactViews {
            input: self.input.execute(partition, context)?,
        }))
    }
}

struct CompactViews {
    input: SendableRecordBatchStream,
}

impl Stream for CompactViews {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.input
            .poll_next_unpin(cx)
            .map(|b| b.map(|b| b.and_then(compact)))
    }
}

impl RecordBatchStream for CompactViews {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}

/// Views longer than this are stored in the data buffers; shorter ones are inline.
const INLINE: u32 = 12;

fn compact(batch: RecordBatch) -> Result<RecordBatch> {
    let mut changed = false;
    let columns: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .map(|c| {
            if !wasteful(c) {
                return Arc::clone(c);
            }
            changed = true;
            match c.data_type() {
                DataType::Utf8View => Arc::new(c.as_string_view().gc()) as ArrayRef,
                _ => Arc::new(c.as_binary_view().gc()),
            }
        })
        .collect();
    if !changed {
        return Ok(batch);
    }
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// Whether a view column's buffers hold more than twice the bytes its rows point at.
fn wasteful(c: &ArrayRef) -> bool {
    let (views, buffers) = match c.data_type() {
        DataType::Utf8View => {
            let a = c.as_string_view();
            (a.views(), a.data_buffers())
        }
        DataType::BinaryView => {
            let a = c.as_binary_view();
            (a.views(), a.data_buffers())
        }
        _ => return false,
    };
    let held: usize = buffers.iter().map(|b| b.len()).sum();
    if held == 0 {
        return false;
    }
    let used: usize = views
        .iter()
        .map(|v| *v as u32)
        .filter(|&len| len > INLINE)
        .map(|len| len as usize)
        .sum();
    held > 2 * used
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::StringViewArray;
    use datafusion::arrow::compute::filter;
    use datafusion::arrow::util::pretty::pretty_format_batches;
    use datafusion::execution::SessionStateBuilder;
    use datafusion::physical_plan::displayable;
    use datafusion::prelude::{SessionConfig, SessionContext};

    use super::*;

    /// With the rules as every query session has them, or DataFusion's alone.
    fn session(rules: bool) -> SessionContext {
        let all = if rules {
            let ours = super::super::late_projection::physical_rules();
            let names: Vec<&str> = ours.iter().map(|r| r.name()).collect();
            let at = |n: &str| names.iter().position(|x| *x == n);
            assert!(at("join_selection").is_some(), "{names:?}");
            assert_eq!(
                at("SetJoins"),
                at("join_selection").map(|i| i + 1),
                "SetJoins runs right after DataFusion's join selection: {names:?}"
            );
            ours
        } else {
            datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new().rules
        };
        let state = SessionStateBuilder::new()
            .with_config(SessionConfig::new().with_target_partitions(2))
            .with_default_features()
            .with_physical_optimizer_rules(all)
            .build();
        SessionContext::new_with_state(state)
    }

    // Two tables big enough that DataFusion's own thresholds choose a partitioned join.
    async fn tables(ctx: &SessionContext) {
        ctx.sql(
            "CREATE TABLE t AS SELECT arrow_cast(concat('user-', CAST(x % 5000 AS VARCHAR), \
             '-padding-to-leave-the-inline-views'), 'Utf8View') AS id, x FROM unnest(range(300000)) AS u(x)",
        )
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    }

    const QUERIES: &[&str] = &[
        "SELECT count(*), count(DISTINCT id) FROM t WHERE id IN (SELECT id FROM t WHERE x % 97 = 3)",
        "SELECT count(*) FROM t WHERE id NOT IN (SELECT id FROM t WHERE x % 97 = 3)",
        "SELECT count(*) FROM t a WHERE EXISTS (SELECT 1 FROM t b WHERE b.id = a.id AND b.x % 89 = 1)",
        "SELECT count(*) FROM t a WHERE NOT EXISTS (SELECT 1 FROM t b WHERE b.id = a.id AND b.x % 89 = 1)",
    ];

    async fn run(ctx: &SessionContext, sql: &str) -> (String, String) {
        let df = ctx.sql(sql).await.unwrap();
        let plan = df.clone().create_physical_plan().await.unwrap();
        let shown = displayable(plan.as_ref()).indent(true).to_string();
        let batches = df.collect().await.unwrap();
        (pretty_format_batches(&batches).unwrap().to_string(), shown)
    }

    #[tokio::test]
    async fn semi_and_anti_joins_collect_their_set_and_answer_the_same() {
        let (ours, theirs) = (session(true), session(false));
        tables(&ours).await;
        tables(&theirs).await;
        for sql in QUERIES {
            let (got, plan) = run(&ours, sql).await;
            let (want, their_plan) = run(&theirs, sql).await;
            assert_eq!(got, want, "{sql}");
            assert!(
                !plan.contains("mode=Partitioned"),
                "{sql}: still partitioned\n{plan}"
            );
            if sql.contains(" IN (") && !sql.contains("NOT IN") {
                // Without the rule DataFusion partitions this one: the test shows the change.
                assert!(their_plan.contains("mode=Partitioned"), "{their_plan}");
                assert!(plan.contains("CompactViewsExec"), "{plan}");
            }
        }
    }

    #[tokio::test]
    async fn other_joins_keep_their_mode() {
        let ctx = session(true);
        tables(&ctx).await;
        let (_, plan) = run(
            &ctx,
            "SELECT count(*) FROM t a JOIN t b ON a.x = b.x WHERE a.x % 3 = 0",
        )
        .await;
        assert!(plan.contains("mode=Partitioned"), "{plan}");
    }

    #[test]
    fn compaction_copies_only_mostly_unused_buffers() {
        let long = |i: usize| format!("a string longer than twelve bytes, number {i}");
        let all = StringViewArray::from_iter_values((0..1000).map(long));
        let every_tenth =
            datafusion::arrow::array::BooleanArray::from_iter((0..1000).map(|i| Some(i % 10 == 0)));
        let sparse: ArrayRef = filter(&all, &every_tenth).unwrap();
        let dense: ArrayRef = Arc::new(all.clone());
        assert!(wasteful(&sparse));
        assert!(!wasteful(&dense));
        let schema = Arc::new(datafusion::arrow::datatypes::Schema::new(vec![
            datafusion::arrow::datatypes::Field::new("s", DataType::Utf8View, false),
        ]));
        let before = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::clone(&sparse)]).unwrap();
        let after = compact(before.clone()).unwrap();
        assert_eq!(after, before);
        let held = |b: &RecordBatch| -> usize {
            b.column(0)
                .as_string_view()
                .data_buffers()
                .iter()
                .map(|b| b.len())
                .sum()
        };
        assert!(
            held(&after) * 5 < held(&before),
            "{} vs {}",
            held(&after),
            held(&before)
        );
        let dense_batch = RecordBatch::try_new(schema, vec![dense]).unwrap();
        let kept = compact(dense_batch.clone()).unwrap();
        assert_eq!(held(&kept), held(&dense_batch));
    }
}
