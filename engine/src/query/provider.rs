//! The events table as one project sees it: the table's Parquet files ∪ the project's
//! unflushed Arrow buffer, behind the project guard.
//!
//! The guard lives here and only here: [`EventsProvider`] is built for one project, asks the
//! table for that project's partition only, and re-checks `team_id` on every row it returns,
//! so no plan, filter or bug elsewhere can make another project's rows appear.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{DFSchema, Result as DFResult, ScalarValue};
use datafusion::datasource::TableType;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, col, lit};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::union::UnionExec;

use crate::model::TeamId;

#[derive(Debug)]
pub(crate) struct EventsProvider {
    team: TeamId,
    files: Arc<dyn TableProvider>,
    /// The project's unflushed rows not yet covered by the files' snapshot, in `schema`.
    buffer: Vec<RecordBatch>,
    schema: SchemaRef,
}

impl EventsProvider {
    /// `files`: the table snapshot's provider; `buffer`: the project's buffered batches that
    /// the snapshot does not contain (see `Engine::events_snapshot`).
    pub(crate) fn new(
        team: TeamId,
        files: Arc<dyn TableProvider>,
        buffer: Vec<RecordBatch>,
    ) -> DFResult<Self> {
        let schema = files.schema();
        let buffer = buffer
            .into_iter()
            .filter(|b| b.num_rows() > 0)
            .map(|b| conform(&b, &schema))
            .collect::<DFResult<Vec<_>>>()?;
        Ok(Self {
            team,
            files,
            buffer,
            schema,
        })
    }

    fn guard(&self) -> Expr {
        col("team_id").eq(lit(ScalarValue::Int64(Some(self.team.0))))
    }
}

/// `batch` with the columns of `schema`, by name, cast where the table's reader types differ
/// (e.g. string views).
fn conform(batch: &RecordBatch, schema: &SchemaRef) -> DFResult<RecordBatch> {
    let cols = schema
        .fields()
        .iter()
        .map(|f| {
            let c = batch.column_by_name(f.name()).ok_or_else(|| {
                datafusion::error::DataFusionError::Internal(format!(
                    "buffered batch has no column {}",
                    f.name()
                ))
            })?;
            Ok(if c.data_type() == f.data_type() {
                c.clone()
            } else {
                cast(c, f.data_type())?
            })
        })
        .collect::<DFResult<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema.clone(), cols)?)
}

#[async_trait]
impl TableProvider for EventsProvider {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
    fn table_type(&self) -> TableType {
        TableType::Base
    }
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DFResult<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        // The guard needs team_id in what the files scan returns.
        let team_idx = self.schema.index_of("team_id")?;
        let inner_projection: Option<Vec<usize>> = projection.map(|p| {
            let mut p = p.clone();
            if !p.contains(&team_idx) {
                p.push(team_idx);
            }
            p
        });
        let mut pushed: Vec<Expr> = filters.to_vec();
        pushed.push(self.guard());
        let files = self
            .files
            .scan(state, inner_projection.as_ref(), &pushed, None)
            .await?;
        let file_schema = files.schema();
        let df_schema = DFSchema::try_from(file_schema.as_ref().clone())?;
        let guard = state.create_physical_expr(self.guard(), &df_schema)?;
        let mut files: Arc<dyn ExecutionPlan> = Arc::new(FilterExec::try_new(guard, files)?);
        if let (Some(p), Some(inner)) = (projection, inner_projection.as_ref())
            && p.len() != inner.len()
        {
            let exprs = (0..p.len())
                .map(|i| {
                    let f = file_schema.field(i);
                    (
                        Arc::new(datafusion::physical_expr::expressions::Column::new(
                            f.name(),
                            i,
                        )) as _,
                        f.name().clone(),
                    )
                })
                .collect::<Vec<_>>();
            files = Arc::new(ProjectionExec::try_new(exprs, files)?);
        }
        if self.buffer.is_empty() {
            return Ok(files);
        }
        let mem = MemorySourceConfig::try_new_exec(
            std::slice::from_ref(&self.buffer),
            self.schema.clone(),
            projection.cloned(),
        )?;
        UnionExec::try_new(vec![files, mem])
    }
}
