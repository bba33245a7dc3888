//! The persons store's tables as HogQL sees them: `persons`, `person_distinct_ids`,
//! `groups` and `ingestion_warnings`, read from the store when a query names them, and the
//! project's person-id overrides.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::datasource::MemTable;

use super::QueryError;
use crate::model::TeamId;
use crate::persons::store::PersonStore;

fn ts() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn table(fields: Vec<Field>, cols: Vec<ArrayRef>) -> Result<MemTable, QueryError> {
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), cols).map_err(QueryError::Arrow)?;
    MemTable::try_new(schema, vec![vec![batch]]).map_err(QueryError::DataFusionInternal)
}

pub(crate) fn persons(store: &dyn PersonStore, team: TeamId) -> Result<MemTable, QueryError> {
    let rows = store.persons_rows(team).map_err(QueryError::PersonStore)?;
    table(
        vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("created_at", ts(), false),
            Field::new("team_id", DataType::Int64, false),
            Field::new("properties", DataType::Utf8, false),
            Field::new("is_identified", DataType::Boolean, false),
        ],
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.0))),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(rows.iter().map(|r| r.1))
                    .with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from_value(team.0, rows.len())),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.2))),
            Arc::new(BooleanArray::from_iter(rows.iter().map(|r| Some(r.3)))),
        ],
    )
}

pub(crate) fn distinct_ids(store: &dyn PersonStore, team: TeamId) -> Result<MemTable, QueryError> {
    let rows = store
        .distinct_id_rows(team)
        .map_err(QueryError::PersonStore)?;
    table(
        vec![
            Field::new("distinct_id", DataType::Utf8, false),
            Field::new("person_id", DataType::Utf8, false),
            Field::new("team_id", DataType::Int64, false),
        ],
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.0))),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.1.to_string()),
            )),
            Arc::new(Int64Array::from_value(team.0, rows.len())),
        ],
    )
}

pub(crate) fn groups(store: &dyn PersonStore, team: TeamId) -> Result<MemTable, QueryError> {
    let rows = store.group_rows(team).map_err(QueryError::PersonStore)?;
    table(
        vec![
            Field::new("index", DataType::Int64, false),
            Field::new("key", DataType::Utf8, false),
            Field::new("created_at", ts(), false),
            Field::new("updated_at", ts(), false),
            Field::new("team_id", DataType::Int64, false),
            Field::new("properties", DataType::Utf8, false),
        ],
        vec![
            Arc::new(Int64Array::from_iter_values(
                rows.iter().map(|g| i64::from(g.index)),
            )),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|g| &g.key))),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    rows.iter().map(|g| g.created_at.timestamp_micros()),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    rows.iter().map(|g| g.updated_at.timestamp_micros()),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from_value(team.0, rows.len())),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|g| {
                serde_json::Value::Object(g.properties.clone()).to_string()
            }))),
        ],
    )
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
