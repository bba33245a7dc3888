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
//!
//! It also lets a top-k stop reading early. A `SortExec` with a fetch pushes its threshold
//! into the scan as a dynamic filter, and DataFusion's Parquet opener then reads row
//! groups best first and drops the rest once the threshold rules them out, but only when
//! no row selection is live, and a page index always makes one (even one that selects
//! every row: DataFusion issue 24358). A scan under a top-k whose predicate holds a
//! dynamic filter therefore does without the page index (row-group statistics, bloom
//! filters and the row filter still apply) and reads whole files in one partition, so
//! the newest row groups come first: at 10M events the bench's point lookup (a person's
//! latest events, `ORDER BY timestamp DESC LIMIT 100`) reads 175 K rows instead of 400 K,
//! and the events list lets 45 K rows through its row filter instead of 139 K.
//!
//! And it takes the files' statistics off a scan whose predicate no dynamic filter on
//! their bounds joins ([`without_idle_statistics`]): the opener would build a pruning
//! predicate per file for bounds the provider has used already.

use std::sync::Arc;

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode, TreeNodeRecursion};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfig, FileSource, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_expr::expressions::{DynamicFilterPhysicalExpr, DynamicFilterTracking};
use datafusion::physical_expr::utils::{collect_columns, conjunction, split_conjunction};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
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

/// Whether a dynamic filter in `predicate` reads a column whose bounds the provider gives
/// each file ([`super::files::FOOTER_STATISTICS`]).
fn bounds_a_dynamic_filter(predicate: &Arc<dyn PhysicalExpr>) -> bool {
    predicate
        .exists(|e| {
            Ok(e.downcast_ref::<DynamicFilterPhysicalExpr>()
                .is_some_and(|d| {
                    d.children().into_iter().any(|c| {
                        collect_columns(c)
                            .iter()
                            .any(|col| super::files::FOOTER_STATISTICS.contains(&col.name()))
                    })
                }))
        })
        .unwrap_or(true)
}

/// A Parquet scan with a predicate, its files without their statistics when no dynamic
/// filter can use them. DataFusion's opener builds a pruning predicate for every file that
/// has statistics and prunes it by them before reading its footer; the provider has pruned
/// the files by the same bounds already (from the Delta log), so only a bound that moves
/// while the scan runs (a top-k's threshold on `timestamp`) can prune more. Building that
/// predicate per file was 12 % of the CPU of a rare event's breakdown over 91 daily files.
fn without_idle_statistics(exec: &DataSourceExec) -> Option<Arc<dyn ExecutionPlan>> {
    let (config, parquet) = exec.downcast_to_file_source::<ParquetSource>()?;
    let files = || config.file_groups.iter().flat_map(|g| g.files());
    if bounds_a_dynamic_filter(&parquet.filter()?) || files().all(|f| f.statistics.is_none()) {
        return None;
    }
    let mut config: FileScanConfig = config.clone();
    config.file_groups = config
        .file_groups
        .iter()
        .map(|g| {
            FileGroup::new(
                g.files()
                    .iter()
                    .map(|f| {
                        let mut f = f.clone();
                        f.statistics = None;
                        f
                    })
                    .collect(),
            )
        })
        .collect();
    Some(Arc::new(exec.clone().with_data_source(Arc::new(config))))
}

/// A Parquet scan whose predicate holds a dynamic filter, without its page index and in
/// one partition: read in parallel, each partition reads its own files' row groups until
/// the threshold rules them out, and the ones holding older rows are read for nothing.
fn for_top_k(exec: &DataSourceExec) -> Option<Arc<dyn ExecutionPlan>> {
    let (config, parquet) = exec.downcast_to_file_source::<ParquetSource>()?;
    if !parquet.table_parquet_options().global.enable_page_index
        || !DynamicFilterTracking::classify(&parquet.filter()?).contains_dynamic_filter()
    {
        return None;
    }
    let mut config: FileScanConfig = config.clone();
    config.file_source = Arc::new(parquet.clone().with_enable_page_index(false));
    // Whole files, not the byte ranges the scan was split into: a file's row groups are
    // read newest first only within one range, so an older range read first sets a
    // threshold that prunes nothing of the newer one.
    let mut files: Vec<PartitionedFile> = Vec::new();
    for f in config.file_groups.iter().flat_map(|g| g.files()) {
        if !files
            .iter()
            .any(|k| k.object_meta.location == f.object_meta.location)
        {
            let mut f = f.clone();
            f.range = None;
            files.push(f);
        }
    }
    config.file_groups = vec![FileGroup::new(files)];
    Some(Arc::new(exec.clone().with_data_source(Arc::new(config))))
}

/// `plan` with the scans a top-k above it reads through rows one to one (projections,
/// filters, repartitions, merges) rewritten by [`for_top_k`].
fn under_top_k(plan: Arc<dyn ExecutionPlan>) -> Result<Transformed<Arc<dyn ExecutionPlan>>> {
    if let Some(exec) = plan.downcast_ref::<DataSourceExec>() {
        return Ok(match for_top_k(exec) {
            Some(new) => Transformed::yes(new),
            None => Transformed::no(plan),
        });
    }
    let passes = plan.is::<ProjectionExec>()
        || plan.is::<FilterExec>()
        || plan.is::<RepartitionExec>()
        || plan.is::<CoalescePartitionsExec>()
        || plan.is::<SortPreservingMergeExec>()
        || plan
            .downcast_ref::<SortExec>()
            .is_some_and(|s| s.fetch().is_some());
    if !passes {
        return Ok(Transformed::no(plan));
    }
    plan.map_children(under_top_k)
}

impl PhysicalOptimizerRule for DistinctScanPredicates {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|p| {
            let Some(exec) = p.downcast_ref::<DataSourceExec>() else {
                return Ok(Transformed::no(p));
            };
            let distinct = rewrite(exec);
            let exec = distinct
                .as_ref()
                .and_then(|d| d.downcast_ref::<DataSourceExec>())
                .unwrap_or(exec);
            Ok(match without_idle_statistics(exec).or(distinct) {
                Some(new) => Transformed::yes(new),
                None => Transformed::no(p),
            })
        })?
        .data
        .transform_down(|p| {
            if p.downcast_ref::<SortExec>()
                .is_some_and(|s| s.fetch().is_some())
            {
                // The top-k's subtree is done here: no second visit of its nodes.
                let mut t = under_top_k(p)?;
                t.tnr = TreeNodeRecursion::Jump;
                Ok(t)
            } else {
                Ok(Transformed::no(p))
            }
        })
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

    fn page_index_of(plan: &Arc<dyn ExecutionPlan>) -> bool {
        scan_of(plan).1
    }

    /// Each file group's files, by path and the start of its byte range.
    type Groups = Vec<Vec<(String, Option<i64>)>>;

    /// The scan's file groups and whether it reads the page index.
    fn scan_of(plan: &Arc<dyn ExecutionPlan>) -> (Groups, bool) {
        let mut found = None;
        plan.apply(|n| {
            if let Some(exec) = n.downcast_ref::<DataSourceExec>() {
                let (config, parquet) = exec.downcast_to_file_source::<ParquetSource>().unwrap();
                let groups = config
                    .file_groups
                    .iter()
                    .map(|g| {
                        g.files()
                            .iter()
                            .map(|f| {
                                (
                                    f.object_meta.location.to_string(),
                                    f.range.as_ref().map(|r| r.start),
                                )
                            })
                            .collect()
                    })
                    .collect();
                found = Some((
                    groups,
                    parquet.table_parquet_options().global.enable_page_index,
                ));
            }
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        })
        .unwrap();
        found.expect("a scan")
    }

    /// A scan whose predicate holds a top-k's dynamic filter reads without its page index
    /// (so the opener may drop row groups as the threshold moves), its files whole and in
    /// one partition; other scans keep theirs.
    #[test]
    fn a_top_k_scan_with_a_dynamic_filter_reads_without_the_page_index() {
        use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
        use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
        let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Int64, true)]));
        let t = col("t", &schema).unwrap();
        let dynamic: Arc<dyn PhysicalExpr> = Arc::new(DynamicFilterPhysicalExpr::new(
            vec![Arc::clone(&t)],
            lit(true),
        ));
        let scan = |p: Arc<dyn PhysicalExpr>| -> Arc<dyn ExecutionPlan> {
            let source = ParquetSource::new(TableSchema::builder(schema.clone()).build())
                .with_enable_page_index(true)
                .with_predicate(p);
            let file = |range: Option<(i64, i64)>| {
                let f = PartitionedFile::new("a.parquet", 100);
                match range {
                    Some((start, end)) => f.with_range(start, end),
                    None => f,
                }
            };
            DataSourceExec::from_data_source(
                FileScanConfigBuilder::new(ObjectStoreUrl::local_filesystem(), Arc::new(source))
                    .with_file_groups(vec![
                        FileGroup::new(vec![file(Some((0, 50)))]),
                        FileGroup::new(vec![file(Some((50, 100)))]),
                    ])
                    .build(),
            )
        };
        let order = LexOrdering::new(vec![PhysicalSortExpr::new_default(Arc::clone(&t))]).unwrap();
        let sort = |input, fetch| -> Arc<dyn ExecutionPlan> {
            Arc::new(SortExec::new(order.clone(), input).with_fetch(fetch))
        };
        let options = ConfigOptions::default();
        let with_dynamic = || {
            conjunction([
                Arc::new(BinaryExpr::new(Arc::clone(&t), Operator::Gt, lit(1i64)))
                    as Arc<dyn PhysicalExpr>,
                Arc::clone(&dynamic),
            ])
        };
        let run = |plan| DistinctScanPredicates.optimize(plan, &options).unwrap();
        let top_k = run(sort(scan(with_dynamic()), Some(100)));
        assert_eq!(
            scan_of(&top_k),
            (vec![vec![("a.parquet".to_string(), None)]], false)
        );
        assert_eq!(top_k.properties().partitioning.partition_count(), 1);
        // Through a projection too.
        let projected: Arc<dyn ExecutionPlan> = Arc::new(
            ProjectionExec::try_new(
                vec![(Arc::clone(&t), "t".to_string())],
                scan(with_dynamic()),
            )
            .unwrap(),
        );
        assert!(!page_index_of(&run(sort(projected, Some(100)))));
        // A full sort, a static predicate, or no sort at all: the page index stays.
        assert!(page_index_of(&run(sort(scan(with_dynamic()), None))));
        assert!(page_index_of(&run(sort(scan(lit(true)), Some(100)))));
        assert!(page_index_of(&run(scan(with_dynamic()))));
        assert_eq!(scan_of(&run(scan(with_dynamic()))).0.len(), 2);
    }

    /// A scan's files keep their statistics only for a dynamic filter on a column the
    /// provider bounds per file (`timestamp`); otherwise the opener would build a pruning
    /// predicate per file for bounds the provider has used already.
    #[test]
    fn files_keep_their_statistics_only_for_a_dynamic_filter_on_their_bounds() {
        use datafusion::common::Statistics;
        use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
        let schema = Arc::new(Schema::new(vec![
            Field::new("timestamp", DataType::Int64, true),
            Field::new("event", DataType::Int64, true),
        ]));
        let dynamic_on = |c: &str| -> Arc<dyn PhysicalExpr> {
            Arc::new(DynamicFilterPhysicalExpr::new(
                vec![col(c, &schema).unwrap()],
                lit(true),
            ))
        };
        let event = || -> Arc<dyn PhysicalExpr> {
            Arc::new(BinaryExpr::new(
                col("event", &schema).unwrap(),
                Operator::Eq,
                lit(1i64),
            ))
        };
        let scan = |p: Option<Arc<dyn PhysicalExpr>>| -> Arc<dyn ExecutionPlan> {
            let mut source = ParquetSource::new(TableSchema::builder(schema.clone()).build());
            if let Some(p) = p {
                source = source.with_predicate(p);
            }
            let file = PartitionedFile::new("a.parquet", 100)
                .with_statistics(Arc::new(Statistics::new_unknown(&schema)));
            DataSourceExec::from_data_source(
                FileScanConfigBuilder::new(ObjectStoreUrl::local_filesystem(), Arc::new(source))
                    .with_file_groups(vec![FileGroup::new(vec![file])])
                    .build(),
            )
        };
        let with_stats = |plan: Arc<dyn ExecutionPlan>| {
            let plan = DistinctScanPredicates
                .optimize(plan, &ConfigOptions::default())
                .unwrap();
            let exec = plan.downcast_ref::<DataSourceExec>().unwrap();
            let (config, _) = exec.downcast_to_file_source::<ParquetSource>().unwrap();
            config.file_groups[0].files()[0].statistics.is_some()
        };
        assert!(!with_stats(scan(Some(event()))), "a static predicate");
        assert!(
            !with_stats(scan(Some(conjunction([event(), dynamic_on("event")])))),
            "a dynamic filter on a column without per-file bounds"
        );
        assert!(with_stats(scan(Some(conjunction([
            event(),
            dynamic_on("timestamp")
        ])))));
        assert!(with_stats(scan(None)), "no predicate: nothing is built");
        // Repeated conjuncts are still dropped when the statistics go.
        let plan = DistinctScanPredicates
            .optimize(
                scan(Some(conjunction([event(), event()]))),
                &ConfigOptions::default(),
            )
            .unwrap();
        assert_eq!(predicate_of(&plan), ["event@1 = 1"]);
    }
}
