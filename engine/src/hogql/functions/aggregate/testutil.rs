//! Test helper: runs translated expressions through a real DataFusion `SessionContext` over
//! a `MemTable`, so UDFs, UDAFs (with their state merge) and window functions are exercised
//! exactly as in a query.

use super::super::{Arg, FnContext, WeekStart};
use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::DFSchema;
use datafusion::datasource::{MemTable, provider_as_source};
use datafusion::logical_expr::{Expr, LogicalPlanBuilder};
use datafusion::prelude::{SessionConfig, SessionContext};
use std::sync::Arc;

pub(super) struct Table {
    schema: Arc<Schema>,
    columns: Vec<ArrayRef>,
    pub tz: &'static str,
}

/// One output column: its type, nullability and values printed one per row.
#[derive(Debug, Clone)]
pub(super) struct Out {
    pub dt: DataType,
    pub nullable: bool,
    pub rows: Vec<String>,
}

impl Out {
    pub(super) fn one(&self) -> &str {
        assert_eq!(self.rows.len(), 1, "expected one row: {self:?}");
        &self.rows[0]
    }
}

impl Table {
    /// Columns as (name, values, nullable).
    pub(super) fn new(cols: Vec<(&str, ArrayRef, bool)>) -> Self {
        let fields: Vec<Field> = cols
            .iter()
            .map(|(n, a, nullable)| Field::new(*n, a.data_type().clone(), *nullable))
            .collect();
        Table {
            schema: Arc::new(Schema::new(fields)),
            columns: cols.into_iter().map(|(_, a, _)| a).collect(),
            tz: "UTC",
        }
    }

    pub(super) fn df_schema(&self) -> DFSchema {
        DFSchema::try_from_qualified_schema("t", &self.schema).unwrap()
    }

    /// Translates `name(params)(args)` against this table.
    pub(super) fn call(
        &self,
        name: &str,
        params: Vec<Expr>,
        args: Vec<Arg>,
        distinct: bool,
    ) -> Expr {
        self.try_call(name, params, args, distinct)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    pub(super) fn try_call(
        &self,
        name: &str,
        params: Vec<Expr>,
        args: Vec<Arg>,
        distinct: bool,
    ) -> Result<Expr, super::FunctionError> {
        let schema = self.df_schema();
        let ctx = FnContext {
            timezone: self.tz,
            week_start: WeekStart::Sunday,
            now: chrono::Utc::now(),
            schema: &schema,
        };
        super::super::translate(name, params, args, distinct, &ctx)
    }

    /// `name(args)` with plain expression arguments.
    pub(super) fn f(&self, name: &str, args: Vec<Expr>) -> Expr {
        self.call(
            name,
            vec![],
            args.into_iter().map(Arg::Expr).collect(),
            false,
        )
    }

    /// `name(params)(args)`.
    pub(super) fn p(&self, name: &str, params: Vec<Expr>, args: Vec<Expr>) -> Expr {
        self.call(
            name,
            params,
            args.into_iter().map(Arg::Expr).collect(),
            false,
        )
    }

    fn batches(&self, partitions: usize) -> Vec<Vec<RecordBatch>> {
        let batch = RecordBatch::try_new(self.schema.clone(), self.columns.clone()).unwrap();
        let n = batch.num_rows();
        if partitions <= 1 || n < 2 {
            return vec![vec![batch]];
        }
        let per = n.div_ceil(partitions);
        (0..partitions)
            .map(|i| {
                let start = (i * per).min(n);
                let len = per.min(n - start);
                vec![batch.slice(start, len)]
            })
            .collect()
    }

    fn run(
        &self,
        partitions: usize,
        build: impl FnOnce(LogicalPlanBuilder) -> LogicalPlanBuilder,
    ) -> Vec<Out> {
        let provider = MemTable::try_new(self.schema.clone(), self.batches(partitions)).unwrap();
        let scan =
            LogicalPlanBuilder::scan("t", provider_as_source(Arc::new(provider)), None).unwrap();
        let plan = build(scan).build().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let config = SessionConfig::new().with_target_partitions(partitions.max(1));
        let ctx = SessionContext::new_with_config(config);
        let batches = rt
            .block_on(async { ctx.execute_logical_plan(plan).await?.collect().await })
            .unwrap_or_else(|e| panic!("query failed: {e}"));
        let schema = batches
            .first()
            .map(|b| b.schema())
            .expect("at least one batch");
        let opts = FormatOptions::default().with_null("NULL");
        schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let mut rows = vec![];
                for b in &batches {
                    let fmt = ArrayFormatter::try_new(b.column(i).as_ref(), &opts).unwrap();
                    for r in 0..b.num_rows() {
                        rows.push(fmt.value(r).to_string());
                    }
                }
                Out {
                    dt: f.data_type().clone(),
                    nullable: f.is_nullable(),
                    rows,
                }
            })
            .collect()
    }

    pub(super) fn agg_parts(&self, partitions: usize, exprs: Vec<Expr>) -> Vec<Out> {
        self.run(partitions, |b| aggregate_then_project(b, vec![], exprs))
    }

    /// Aggregates by `group` and sorts by it; the group key is not in the output.
    pub(super) fn agg_by(&self, group: Expr, exprs: Vec<Expr>) -> Vec<Out> {
        self.run(2, |b| {
            aggregate_then_project(b, vec![group.alias("g")], exprs)
        })
    }

    /// One output row per input row (single partition, order kept).
    pub(super) fn project(&self, exprs: Vec<Expr>) -> Vec<Out> {
        let aliased: Vec<Expr> = exprs
            .into_iter()
            .enumerate()
            .map(|(i, e)| e.alias(format!("c{i}")))
            .collect();
        self.run(1, |b| b.project(aliased).unwrap())
    }

    /// Window expressions (already completed with [`over`]): the window nodes go into a
    /// Window plan, the expressions around them into a projection; rows keep input order.
    pub(super) fn window(&self, exprs: Vec<Expr>) -> Vec<Out> {
        use datafusion::common::Column;
        use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
        let nodes = datafusion::logical_expr::utils::find_window_exprs(exprs.iter());
        let projected: Vec<Expr> = exprs
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                e.transform_down(|n| {
                    Ok(match n {
                        Expr::WindowFunction(_) => {
                            let name = n.schema_name().to_string();
                            Transformed::new(
                                Expr::Column(Column::from_name(name)),
                                true,
                                TreeNodeRecursion::Jump,
                            )
                        }
                        other => Transformed::no(other),
                    })
                })
                .unwrap()
                .data
                .alias(format!("c{i}"))
            })
            .collect();
        self.run(1, |b| b.window(nodes).unwrap().project(projected).unwrap())
    }
}

/// Sets PARTITION BY / ORDER BY / frame on a window expression (what the planner does).
pub(super) fn over(
    e: Expr,
    partition_by: Vec<Expr>,
    order_by: Vec<datafusion::logical_expr::SortExpr>,
    frame: Option<datafusion::logical_expr::WindowFrame>,
) -> Expr {
    use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
    use datafusion::logical_expr::expr::{AggregateFunction, WindowFunction};
    use datafusion::logical_expr::{WindowFrame, WindowFunctionDefinition};
    let has_order = !order_by.is_empty();
    let frame =
        frame.unwrap_or_else(|| WindowFrame::new(if has_order { Some(false) } else { None }));
    let fill = |w: &mut WindowFunction| {
        w.params.partition_by = partition_by.clone();
        w.params.order_by = order_by.clone();
        w.params.window_frame = frame.clone();
    };
    e.transform_down(|n| {
        Ok(match n {
            Expr::WindowFunction(mut w) => {
                fill(&mut w);
                Transformed::new(Expr::WindowFunction(w), true, TreeNodeRecursion::Jump)
            }
            Expr::AggregateFunction(AggregateFunction { func, params }) => {
                let mut w =
                    WindowFunction::new(WindowFunctionDefinition::AggregateUDF(func), params.args);
                fill(&mut w);
                w.params.filter = params.filter;
                w.params.null_treatment = params.null_treatment;
                w.params.distinct = params.distinct;
                Transformed::new(
                    Expr::WindowFunction(Box::new(w)),
                    true,
                    TreeNodeRecursion::Jump,
                )
            }
            other => Transformed::no(other),
        })
    })
    .unwrap()
    .data
}

/// What the planner does with aggregates: the AggregateFunction nodes go into an Aggregate,
/// the expressions around them into a projection above it.
fn aggregate_then_project(
    b: LogicalPlanBuilder,
    group: Vec<Expr>,
    exprs: Vec<Expr>,
) -> LogicalPlanBuilder {
    use datafusion::common::Column;
    use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
    let aggs = datafusion::logical_expr::utils::find_aggregate_exprs(exprs.iter());
    let has_group = !group.is_empty();
    let b = b.aggregate(group, aggs).unwrap();
    let b = if has_group {
        b.sort(vec![datafusion::prelude::col("g").sort(true, true)])
            .unwrap()
    } else {
        b
    };
    let projected: Vec<Expr> = exprs
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            e.transform_down(|n| {
                Ok(match n {
                    Expr::AggregateFunction(_) => {
                        let name = n.schema_name().to_string();
                        Transformed::new(
                            Expr::Column(Column::from_name(name)),
                            true,
                            TreeNodeRecursion::Jump,
                        )
                    }
                    other => Transformed::no(other),
                })
            })
            .unwrap()
            .data
            .alias(format!("c{i}"))
        })
        .collect();
    b.project(projected).unwrap()
}

pub(super) fn col(name: &str) -> Expr {
    datafusion::prelude::col(format!("t.{name}"))
}

pub(super) fn lit<T: datafusion::logical_expr::Literal>(v: T) -> Expr {
    datafusion::prelude::lit(v)
}

/// A deterministic stream of pseudo-random numbers (xorshift64) for generated test data.
pub(super) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed.max(1);
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}
