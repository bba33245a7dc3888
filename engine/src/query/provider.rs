//! The events table as one project sees it: the table's Parquet files ∪ the project's
//! unflushed Arrow buffer, behind the project guard.
//!
//! The guard lives here and only here: [`EventsProvider`] is built for one project, asks the
//! table for that project's partition only, and re-checks `team_id` on every row it returns,
//! so no plan, filter or bug elsewhere can make another project's rows appear.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
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
use crate::storage::layout::{conform, union_schema};

#[derive(Debug)]
pub(crate) struct EventsProvider {
    team: TeamId,
    files: Arc<dyn TableProvider>,
    /// The project's unflushed rows not yet covered by the files' snapshot, in `schema`.
    buffer: Vec<RecordBatch>,
    /// The files' columns, then columns only buffered rows have so far (a property promoted
    /// since the last flush); the files read those as NULL.
    schema: SchemaRef,
    /// What the files' scan knows: a prefix of `schema`.
    files_schema: SchemaRef,
}

impl EventsProvider {
    /// `files`: the table snapshot's provider; `buffer`: the project's buffered batches that
    /// the snapshot does not contain (see `Engine::events_snapshot`).
    pub(crate) fn new(
        team: TeamId,
        files: Arc<dyn TableProvider>,
        buffer: Vec<RecordBatch>,
    ) -> DFResult<Self> {
        let files_schema = files.schema();
        let buffer: Vec<RecordBatch> = buffer.into_iter().filter(|b| b.num_rows() > 0).collect();
        let schema = union_schema(
            std::iter::once(files_schema.as_ref())
                .chain(buffer.iter().map(|b| b.schema_ref().as_ref())),
        );
        let buffer = buffer
            .iter()
            .map(|b| conform(b, &schema))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            team,
            files,
            buffer,
            files_schema,
            schema,
        })
    }

    fn guard(&self) -> Expr {
        col("team_id").eq(lit(ScalarValue::Int64(Some(self.team.0))))
    }
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
        let files_width = self.files_schema.fields().len();
        let all: Vec<usize> = (0..self.schema.fields().len()).collect();
        let wanted: &[usize] = projection.map_or(&all, |p| p.as_slice());
        let mut file_cols: Vec<usize> = wanted
            .iter()
            .copied()
            .filter(|i| *i < files_width)
            .collect();
        let n_file_wanted = file_cols.len();
        if !file_cols.contains(&team_idx) {
            file_cols.push(team_idx);
        }
        let inner_projection = Some(file_cols.clone());
        // Filters on buffer-only columns cannot reach the files' scan (it does not know
        // them); every filter is inexact, so all of them are applied above anyway.
        let files_schema = &self.files_schema;
        let mut pushed: Vec<Expr> = filters
            .iter()
            .filter(|f| {
                f.column_refs()
                    .iter()
                    .all(|c| files_schema.index_of(&c.name).is_ok())
            })
            .cloned()
            .collect();
        pushed.push(self.guard());
        let files = self
            .files
            .scan(state, inner_projection.as_ref(), &pushed, None)
            .await?;
        let file_schema = files.schema();
        let df_schema = DFSchema::try_from(file_schema.as_ref().clone())?;
        let guard = state.create_physical_expr(self.guard(), &df_schema)?;
        let mut files: Arc<dyn ExecutionPlan> = Arc::new(FilterExec::try_new(guard, files)?);
        if n_file_wanted != file_cols.len() || n_file_wanted != wanted.len() {
            // Back to the columns asked for, in their order: the files' by position in the
            // scan, buffer-only columns as NULL.
            let mut next_file = 0;
            let exprs = wanted
                .iter()
                .map(|&i| {
                    let f = self.schema.field(i);
                    let e: Arc<dyn datafusion::physical_expr::PhysicalExpr> = if i < files_width {
                        let at = next_file;
                        next_file += 1;
                        Arc::new(datafusion::physical_expr::expressions::Column::new(
                            file_schema.field(at).name(),
                            at,
                        ))
                    } else {
                        Arc::new(datafusion::physical_expr::expressions::Literal::new(
                            ScalarValue::try_from(f.data_type())?,
                        ))
                    };
                    Ok((e, f.name().clone()))
                })
                .collect::<DFResult<Vec<_>>>()?;
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
