//! Yield points after the operators that multiply rows, so a heavy query can be stopped.
//!
//! A query runs as one task on the query runtime; it is cancelled, or stopped at its time
//! limit, only when its stream returns to the scheduler. DataFusion's scans and exchanges
//! spend Tokio's task budget, so most plans return often. A join does not: `a CROSS JOIN b
//! CROSS JOIN c` over 1 000 events each makes 10⁹ rows out of three batches, and the
//! aggregate above pulled every one of them inside a single poll — minutes in which a
//! DELETE or the time limit could not stop it and the query held its place and a thread
//! (measured: the per-project places were still taken 30 s after both DELETEs, under the
//! suite's load). This rule, run last, puts a `CooperativeExec` above every join and
//! unnest: each batch they emit spends budget, so the task yields at least every 128
//! batches.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::joins::{
    CrossJoinExec, HashJoinExec, NestedLoopJoinExec, SortMergeJoinExec, SymmetricHashJoinExec,
};
use datafusion::physical_plan::unnest::UnnestExec;

#[derive(Debug, Default)]
pub(crate) struct YieldPoints;

/// Operators that can emit many batches per batch they read.
fn multiplies_rows(p: &dyn ExecutionPlan) -> bool {
    p.downcast_ref::<CrossJoinExec>().is_some()
        || p.downcast_ref::<NestedLoopJoinExec>().is_some()
        || p.downcast_ref::<HashJoinExec>().is_some()
        || p.downcast_ref::<SortMergeJoinExec>().is_some()
        || p.downcast_ref::<SymmetricHashJoinExec>().is_some()
        || p.downcast_ref::<UnnestExec>().is_some()
}

impl PhysicalOptimizerRule for YieldPoints {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|p| {
            if multiplies_rows(p.as_ref()) {
                Ok(Transformed::yes(
                    Arc::new(CooperativeExec::new(p)) as Arc<dyn ExecutionPlan>
                ))
            } else {
                Ok(Transformed::no(p))
            }
        })
        .data()
    }

    fn name(&self) -> &str {
        "YieldPoints"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use std::task::Poll;
    use std::time::{Duration, Instant};

    use datafusion::execution::SessionStateBuilder;
    use datafusion::prelude::{SessionConfig, SessionContext};
    use futures::StreamExt;

    use super::*;

    fn session(with_rule: bool) -> SessionContext {
        let mut rules = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new().rules;
        if with_rule {
            rules.push(Arc::new(YieldPoints));
        }
        let state = SessionStateBuilder::new()
            .with_config(SessionConfig::new().with_target_partitions(1))
            .with_default_features()
            .with_physical_optimizer_rules(rules)
            .build();
        SessionContext::new_with_state(state)
    }

    /// Polls the query's stream once with a fresh budget and says how long the poll took
    /// and whether it came back before the end.
    async fn first_poll(ctx: &SessionContext, sql: &str) -> (Duration, bool) {
        let mut stream = ctx.sql(sql).await.unwrap().execute_stream().await.unwrap();
        let t = Instant::now();
        let pending =
            futures::future::poll_fn(|cx| Poll::Ready(stream.poll_next_unpin(cx).is_pending()))
                .await;
        (t.elapsed(), pending)
    }

    // 1 000 × 1 000 × 20 rows from three tiny tables: without yield points the count is
    // computed inside the first poll.
    const HEAVY: &str = "WITH t AS (SELECT * FROM unnest(range(1000)) AS t(x)) \
        SELECT count(*) FROM t a CROSS JOIN t b CROSS JOIN (SELECT * FROM t LIMIT 20) c \
        WHERE a.x + b.x <> c.x";

    #[tokio::test]
    async fn a_cross_join_returns_to_the_scheduler() {
        let (_, pending) = first_poll(&session(true), HEAVY).await;
        assert!(pending, "the first poll ran the whole join");
        let (_, pending) = first_poll(&session(false), HEAVY).await;
        assert!(
            !pending,
            "without the rule the whole join runs in one poll (if DataFusion now yields \
             inside joins, this rule may be dropped)"
        );
    }

    #[tokio::test]
    async fn answers_do_not_change() {
        let sql = "WITH t AS (SELECT * FROM unnest(range(300)) AS t(x)) \
            SELECT count(*), sum(a.x * b.x) FROM t a JOIN t b ON a.x % 7 = b.x % 7 \
            CROSS JOIN (SELECT unnest([1, 2, 3]) AS y) c";
        let mut got = Vec::new();
        for with in [true, false] {
            let batches = session(with)
                .sql(sql)
                .await
                .unwrap()
                .collect()
                .await
                .unwrap();
            got.push(
                datafusion::arrow::util::pretty::pretty_format_batches(&batches)
                    .unwrap()
                    .to_string(),
            );
        }
        assert_eq!(got[0], got[1]);
    }
}
