//! The person store's `ingestion_warnings` as HogQL sees them, read from the store when a
//! query names the table (`persons`, `person_distinct_ids` and `groups` are snapshots:
//! `person_snapshot`).

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::datasource::MemTable;

use super::QueryError;
use crate::model::TeamId;
use crate::persons::store::PersonStore;

/// Microsecond UTC timestamps, as every persons-store table shows times.
pub(super) fn ts() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn table(fields: Vec<Field>, cols: Vec<ArrayRef>) -> Result<MemTable, QueryError> {
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), cols).map_err(QueryError::Arrow)?;
    MemTable::try_new(schema, vec![vec![batch]]).map_err(QueryError::DataFusionInternal)
}

pub(crate) fn warnings(store: &dyn PersonStore, team: TeamId) -> Result<MemTable, QueryError> {
    let rows = store.warnings(team).map_err(QueryError::PersonStore)?;
    table(
        vec![
            Field::new("team_id", DataType::Int64, false),
            Field::new("source", DataType::Utf8, false),
            Field::new("type", DataType::Utf8, false),
            Field::new("details", DataType::Utf8, false),
            Field::new("timestamp", ts(), false),
        ],
        vec![
            Arc::new(Int64Array::from_value(team.0, rows.len())),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|w| &w.source),
            )),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|w| &w.kind))),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|w| w.details.to_string()),
            )),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    rows.iter().map(|w| w.timestamp.timestamp_micros()),
                )
                .with_timezone("UTC"),
            ),
        ],
    )
}
