//! Running one HogQL query: parse, the LIMIT rules, plan against the project's catalog,
//! optimize and execute on the query runtime, and what the scans read.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::RecordBatch;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Modifiers, QueryError, QueryResults, QueryService, exec, result};
use crate::hogql::{ast, parser, planner, print};
use crate::meta::Project;

/// Rows a query without LIMIT returns (PostHog's default).
pub const DEFAULT_LIMIT: usize = 100;
/// The most rows any query returns; an explicit LIMIT above it is lowered to it.
pub const MAX_LIMIT: usize = 50_000;

/// A planned HogQL query, ready to run.
struct Planned {
    ctx: SessionContext,
    plan: LogicalPlan,
    limit: usize,
    offset: usize,
    probe: Option<usize>,
    hogql: String,
    /// The planning stages' times (`./plan/…`), seconds.
    timings: Vec<(String, f64)>,
}

/// A finished HogQL run, before it is shaped into a response.
pub struct HogQLRun {
    pub columns: Vec<String>,
    pub types: Vec<(String, String)>,
    pub batches: Vec<RecordBatch>,
    pub results: Vec<Value>,
    /// A result that is one object rather than rows (see `QueryResults::object`).
    pub object: Option<Value>,
    pub has_more: bool,
    pub limit: usize,
    pub offset: usize,
    pub hogql: String,
    pub timings: Vec<(String, f64)>,
    pub read_bytes: u64,
    pub scan: ScanStats,
}

impl QueryService {
    /// Parses, plans and runs one HogQL query for `project` on the query runtime, under its
    /// admission rules and time limit (see `exec`). Stops (and returns
    /// [`QueryError::Cancelled`]) as soon as `cancel` fires.
    pub async fn run_hogql(
        self: &Arc<Self>,
        project: &Project,
        text: &str,
        values: &HashMap<String, Value>,
        modifiers: Modifiers,
        cancel: &CancellationToken,
    ) -> Result<HogQLRun, QueryError> {
        let admitted = self.exec.admit(project.id)?;
        self.run_hogql_admitted(admitted, project, text, values, modifiers, cancel)
            .await
    }

    pub(super) async fn run_hogql_admitted(
        self: &Arc<Self>,
        admitted: exec::Admitted,
        project: &Project,
        text: &str,
        values: &HashMap<String, Value>,
        modifiers: Modifiers,
        cancel: &CancellationToken,
    ) -> Result<HogQLRun, QueryError> {
        let (this, project2, text, values) = (
            self.clone(),
            project.clone(),
            text.to_string(),
            values.clone(),
        );
        self.exec
            .run_admitted(admitted, cancel, async move {
                this.run_hogql_here(&project2, &text, &values, modifiers)
                    .await
            })
            .await
    }

    /// [`Self::run_hogql`] on the calling task.
    pub(super) async fn run_hogql_here(
        &self,
        project: &Project,
        text: &str,
        values: &HashMap<String, Value>,
        modifiers: Modifiers,
    ) -> Result<HogQLRun, QueryError> {
        let mut timings = Vec::new();
        let t0 = Instant::now();
        let planned = self.plan_hogql(project, text, values, modifiers).await?;
        let Planned {
            ctx,
            plan,
            limit,
            offset,
            probe,
            hogql,
            timings: stages,
        } = planned;
        timings.extend(stages);
        timings.push(("./plan".to_string(), t0.elapsed().as_secs_f64()));

        let t2 = Instant::now();
        let (_, physical, batches) = self.execute(&ctx, plan).await?;
        let schema = physical.schema();
        let mut scan = ScanStats::default();
        scan_stats(physical.as_ref(), &mut scan);
        timings.push(("./execute".to_string(), t2.elapsed().as_secs_f64()));

        let mut results = match modifiers.whole {
            true => Vec::new(),
            false => result::json_rows(&batches),
        };
        let mut has_more = false;
        if let Some(n) = probe
            && results.len() > n
        {
            results.truncate(n);
            has_more = true;
        }
        let batches = match modifiers.whole {
            true => batches,
            false => truncate_batches(batches, results.len()),
        };
        let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let types = schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), result::clickhouse_type(f)))
            .collect();
        timings.push(("./total".to_string(), t0.elapsed().as_secs_f64()));
        Ok(HogQLRun {
            columns,
            types,
            batches,
            results,
            object: None,
            has_more,
            limit,
            offset,
            hogql,
            timings,
            read_bytes: scan.bytes,
            scan,
        })
    }

    /// Parses and plans a HogQL query of `project` (LIMIT rules applied).
    async fn plan_hogql(
        &self,
        project: &Project,
        text: &str,
        values: &HashMap<String, Value>,
        modifiers: Modifiers,
    ) -> Result<Planned, QueryError> {
        let mut query = parser::parse_query(text)?;
        let filter_cx = crate::insights::FilterContext::events(
            project.timezone.parse().unwrap_or(chrono_tz::UTC),
            self.clock.now(),
        );
        let meta = self.meta.clone();
        let team = project.id;
        let cohorts = move || {
            meta.cohorts(team)
                .map(|v| v.into_iter().map(|c| (c.id, c.name)).collect())
                .map_err(|e| crate::hogql::planner::PlanError::new(e.to_string(), None))
        };
        super::placeholders::substitute(&mut query, values, &filter_cx, &cohorts).map_err(
            |source| QueryError::Plan {
                at: source.span.map(|s| position(text, s.start)),
                source,
            },
        )?;
        // LIMIT rules: none → 100 (one more fetched to know hasMore); above 50 000 → 50 000.
        let (limit, offset, probe) = match modifiers.whole {
            true => (usize::MAX, 0, None),
            false => limit_rules(&mut query),
        };
        let hogql = print::query(&query);
        let mut timings = Vec::new();
        let t = Instant::now();
        let ctx = self.session();
        timings.push(("./plan/session".to_string(), t.elapsed().as_secs_f64()));
        let t = Instant::now();
        let catalog = self.catalog(project.id, &ctx, &mut timings).await?;
        timings.push(("./plan/catalog".to_string(), t.elapsed().as_secs_f64()));
        let t = Instant::now();
        let parse = |t: &str| parser::parse_query(t).map_err(|e| e.to_string());
        let print_expr = |e: &ast::Expr| print::expr(e);
        let plan = {
            let pctx = planner::PlanContext {
                catalog: &catalog,
                timezone: project.timezone.clone(),
                week_start: modifiers.week_start,
                persons_mode: modifiers.persons_mode,
                now: self.clock.now(),
                values: values.clone(),
                parse: &parse,
                print: &print_expr,
            };
            planner::plan_query(&query, &pctx).map_err(|source| QueryError::Plan {
                at: source.span.map(|s| position(text, s.start)),
                source,
            })?
        };
        timings.push(("./plan/hogql".to_string(), t.elapsed().as_secs_f64()));
        let plan = if let Some(n) = probe {
            datafusion::logical_expr::LogicalPlanBuilder::from(plan)
                .limit(0, Some(n + 1))
                .and_then(|b| b.build())?
        } else {
            plan
        };
        Ok(Planned {
            ctx,
            plan,
            limit,
            offset,
            probe,
            hogql,
            timings,
        })
    }

    /// Runs a HogQL query and describes how it ran: the optimized DataFusion logical plan and
    /// the physical plan with each operator's metrics (rows, time, bytes scanned, files and
    /// row groups pruned). What `hedgerow query --explain` prints.
    pub async fn explain_hogql(
        self: &Arc<Self>,
        project: &Project,
        text: &str,
        runs: u32,
    ) -> Result<String, QueryError> {
        let (this, project2, text) = (self.clone(), project.clone(), text.to_string());
        self.exec
            .run(project.id, &CancellationToken::new(), async move {
                this.explain_here(&project2, &text, runs).await
            })
            .await
    }

    /// Runs `text` `runs` times (at least once) and shows the last run: the earlier ones
    /// warm the caches a running server would have warm.
    async fn explain_here(
        &self,
        project: &Project,
        text: &str,
        runs: u32,
    ) -> Result<String, QueryError> {
        for _ in 1..runs {
            let p = self
                .plan_hogql(project, text, &HashMap::new(), Modifiers::default())
                .await?;
            self.execute(&p.ctx, p.plan).await?;
        }
        let started = std::time::Instant::now();
        let p = self
            .plan_hogql(project, text, &HashMap::new(), Modifiers::default())
            .await?;
        let (plan, physical, _) = self.execute(&p.ctx, p.plan).await?;
        let elapsed = started.elapsed();
        let shown = datafusion::physical_plan::display::DisplayableExecutionPlan::with_metrics(
            physical.as_ref(),
        )
        .indent(true)
        .to_string();
        let cache = p.ctx.runtime_env().cache_manager.get_file_metadata_cache();
        Ok(format!(
            "-- HogQL\n{}\n\n-- optimized logical plan\n{}\n\n-- physical plan, with metrics (run {runs}: {elapsed:?} planning included)\n{}\n-- footer cache: {} files, {:.1} of {:.1} MiB\n",
            p.hogql,
            plan.display_indent(),
            shown,
            cache.len(),
            cache
                .list_entries()
                .values()
                .map(|e| e.size_bytes)
                .sum::<usize>() as f64
                / 1048576.0,
            cache.cache_limit() as f64 / 1048576.0,
        ))
    }

    /// Optimizes, plans and runs `plan`: the optimized logical plan, the finished physical
    /// plan (its metrics filled in) and the result.
    async fn execute(
        &self,
        ctx: &SessionContext,
        plan: LogicalPlan,
    ) -> Result<(LogicalPlan, Arc<dyn ExecutionPlan>, Vec<RecordBatch>), QueryError> {
        let state = ctx.state();
        let plan = state.optimize(&plan)?;
        let physical = state.create_physical_plan(&plan).await?;
        let batches = collect(physical.clone(), ctx.task_ctx()).await?;
        Ok((plan, physical, batches))
    }
}

/// Applies the LIMIT rules to the outermost query; returns (limit, offset, probe) where probe
/// is the row count whose overflow means `hasMore`.
fn limit_rules(q: &mut ast::Query) -> (usize, usize, Option<usize>) {
    let lit_usize = |e: &Option<ast::Expr>| match e.as_ref().map(|e| &e.kind) {
        Some(ast::ExprKind::Literal(ast::Literal::Int(i))) if *i >= 0 => Some(*i as usize),
        _ => None,
    };
    match q {
        ast::Query::Select(s) => {
            let offset = lit_usize(&s.offset).unwrap_or(0);
            // `LIMIT p %` counts a share of the rows, not rows: PostHog caps it with nothing.
            if s.limit_percent {
                return (MAX_LIMIT, offset, Some(MAX_LIMIT));
            }
            match lit_usize(&s.limit) {
                None if s.limit.is_none() => (DEFAULT_LIMIT, offset, Some(DEFAULT_LIMIT)),
                Some(n) if n > MAX_LIMIT => {
                    let span = s.limit.as_ref().map(|e| e.span).unwrap_or_default();
                    s.limit = Some(ast::Expr::new(
                        ast::ExprKind::Literal(ast::Literal::Int(MAX_LIMIT as i128)),
                        span,
                    ));
                    (MAX_LIMIT, offset, Some(MAX_LIMIT))
                }
                Some(n) => (n, offset, None),
                None => (MAX_LIMIT, offset, Some(MAX_LIMIT)),
            }
        }
        // Set operations: the outer LIMIT applies to the whole result.
        ast::Query::SetOp { .. } | ast::Query::Placeholder(_) | ast::Query::Offset { .. } => {
            (DEFAULT_LIMIT, 0, Some(DEFAULT_LIMIT))
        }
    }
}

fn truncate_batches(batches: Vec<RecordBatch>, mut rows: usize) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    for b in batches {
        if rows == 0 {
            break;
        }
        let n = b.num_rows().min(rows);
        out.push(b.slice(0, n));
        rows -= n;
    }
    out
}

/// What a query read from Parquet, summed over its scans: files opened, row groups kept after
/// statistics, bloom filter and page index pruning (of how many), rows and bytes; and what
/// its operators spilled to disk when the memory pool ran short.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    pub files: u64,
    pub row_groups_total: u64,
    pub row_groups_read: u64,
    pub rows: u64,
    pub bytes: u64,
    pub spilled_bytes: u64,
}

impl ScanStats {
    /// Adds another run's counts (a node that runs several queries).
    pub fn add(&mut self, o: &ScanStats) {
        self.files += o.files;
        self.row_groups_total += o.row_groups_total;
        self.row_groups_read += o.row_groups_read;
        self.rows += o.rows;
        self.bytes += o.bytes;
        self.spilled_bytes += o.spilled_bytes;
    }
}

fn scan_stats(plan: &dyn ExecutionPlan, out: &mut ScanStats) {
    use datafusion::physical_plan::metrics::MetricValue;
    if let Some(m) = plan.metrics() {
        let count = |name: &str| m.sum_by_name(name).map_or(0, |v| v.as_usize() as u64);
        out.spilled_bytes += m.spilled_bytes().unwrap_or(0) as u64;
        // Scans report one metric set per file: sum them.
        let pruning = |name: &str| {
            let mut found = None;
            for metric in m.iter() {
                if let MetricValue::PruningMetrics {
                    name: n,
                    pruning_metrics: p,
                } = metric.value()
                    && n == name
                {
                    let (t, k) = found.unwrap_or((0u64, 0u64));
                    found = Some((
                        t + (p.pruned() + p.matched()) as u64,
                        k + p.matched() as u64,
                    ));
                }
            }
            found
        };
        if let Some((total, after_stats)) = pruning("row_groups_pruned_statistics") {
            out.files += count("files_opened");
            out.bytes += count("bytes_scanned");
            out.rows += m.output_rows().unwrap_or(0) as u64;
            // Bloom filters are consulted after statistics, on what statistics kept.
            let kept = pruning("row_groups_pruned_bloom_filter")
                .filter(|(t, _)| *t == after_stats)
                .map_or(after_stats, |(_, m)| m);
            out.row_groups_total += total;
            out.row_groups_read += kept;
        }
    }
    for c in plan.children() {
        scan_stats(c.as_ref(), out);
    }
}

/// `line L, column C` of a byte offset.
pub fn position(text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("line {line}, column {col}")
}

impl HogQLRun {
    /// What a response shows of this run.
    pub(super) fn into_results(self) -> QueryResults {
        QueryResults {
            columns: self.columns,
            types: self.types,
            rows: self.results,
            object: self.object,
            hogql: self.hogql,
            timings: self.timings,
            has_more: self.has_more,
            limit: self.limit,
            offset: self.offset,
        }
    }
}
