//! One project's Parquet files of the table snapshot as a DataFusion table: our own scan of
//! the files the Delta log lists, instead of delta-rs's provider.
//!
//! delta-rs's scan (1.1) reads a file through a Parquet scan whose schema is the Delta
//! schema's: the 16-byte ids (`binary` to Delta) came out as `BinaryView`, a cast per batch
//! that `to_uuid` undid (10% of a weekly-active-users query's CPU at 10M events), every
//! batch went through the kernel's expression evaluation and a file-id dictionary column,
//! and the pushed predicate reached the Parquet scan twice. Here the scan is DataFusion's
//! Parquet source over the same files, typed as the files are (`FixedSizeBinary(16)` ids,
//! string views), with `team_id` and `event_date` as partition columns from the log's
//! partition values, and the files whose Delta statistics rule the filters out are left out
//! before the plan is built. The measurements are in docs/architecture.md ("Reading the
//! files").

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::stats::Precision;
use datafusion::common::{Column, DFSchema, Result as DFResult, ScalarValue, Statistics};
use datafusion::config::TableParquetOptions;
use datafusion::datasource::TableType;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::metadata::CachedParquetMetaData;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::conjunction;
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use object_store::ObjectMeta;
use parquet::file::metadata::ParquetMetaData;

use super::page_index::ScannedFile;

use crate::model::TeamId;
use crate::storage::ids::ID_COLUMNS;
use crate::storage::schema::PARTITION_COLUMNS;
use crate::storage::table::ScanFile;

/// The column whose filters a file's bloom filters answer (the only one written with them).
const BLOOM_COLUMN: &str = "distinct_id";

#[derive(Debug)]
pub(crate) struct FilesProvider {
    team: TeamId,
    /// The files' columns, then the partition columns.
    schema: SchemaRef,
    file_schema: SchemaRef,
    partition_cols: Vec<FieldRef>,
    store: ObjectStoreUrl,
    files: Vec<ScanFile>,
    /// The table's directory when it is on the local file system (read in place,
    /// [`super::local_read`]).
    local_root: Option<std::path::PathBuf>,
}

impl FilesProvider {
    /// `delta_schema`: the table's Arrow schema by its Delta schema (partition columns
    /// included); `files`: the project's files (`storage::table::team_files`), readable
    /// through `store`.
    pub(crate) fn new(
        team: TeamId,
        delta_schema: &Schema,
        store: ObjectStoreUrl,
        files: Vec<ScanFile>,
    ) -> Self {
        let delta_schema = crate::storage::ids::file_schema(delta_schema);
        let mut file_fields = Vec::new();
        let mut partition_cols = Vec::new();
        for f in delta_schema.fields() {
            if PARTITION_COLUMNS.contains(&f.name().as_str()) {
                continue;
            }
            file_fields.push(Arc::new(as_read(f)));
        }
        for name in PARTITION_COLUMNS {
            if let Ok(f) = delta_schema.field_with_name(name) {
                partition_cols.push(Arc::new(f.clone()));
            }
        }
        let file_schema = Arc::new(Schema::new(file_fields));
        let schema = Arc::new(Schema::new(
            file_schema
                .fields()
                .iter()
                .chain(partition_cols.iter())
                .cloned()
                .collect::<Vec<_>>(),
        ));
        Self {
            team,
            schema,
            file_schema,
            partition_cols,
            store,
            files,
            local_root: None,
        }
    }

    /// Reads the files from `root`, the table's local directory, in place.
    pub(crate) fn with_local_root(mut self, root: Option<std::path::PathBuf>) -> Self {
        self.local_root = root;
        self
    }

    /// The files `predicate` may need, by their statistics and partition values.
    fn keep(&self, predicate: &PruningPredicate) -> DFResult<Vec<bool>> {
        predicate.prune(&FileStats {
            provider: self,
            files: &self.files,
        })
    }

    fn partition_values(&self, file: &ScanFile) -> Vec<ScalarValue> {
        self.partition_cols
            .iter()
            .map(|f| match f.name().as_str() {
                "team_id" => ScalarValue::Int64(Some(self.team.0)),
                _ => ScalarValue::Date32(file.event_date),
            })
            .collect()
    }
}

/// A field as the scan reads it: strings and binary as views (the ids are the 16 bytes
/// the files hold, `storage::ids::file_schema`).
fn as_read(f: &Field) -> Field {
    let t = match f.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 => DataType::Utf8View,
        DataType::Binary | DataType::LargeBinary => DataType::BinaryView,
        t => t.clone(),
    };
    f.clone().with_data_type(t)
}

#[async_trait]
impl TableProvider for FilesProvider {
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
        limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let df_schema = DFSchema::try_from(self.schema.as_ref().clone())?;
        // Every filter is inexact (applied above the scan too), so one the scan cannot
        // express is simply not pushed. The same conjunct can come more than once (HogQL's
        // planner reads `timestamp` through a cast to its own type, and the filter arrives
        // with and without it): each is evaluated once.
        let mut physical: Vec<Arc<dyn datafusion::physical_expr::PhysicalExpr>> = Vec::new();
        for f in filters {
            if let Ok(p) = state.create_physical_expr(f.clone(), &df_schema)
                && !physical.iter().any(|q| q.as_ref() == p.as_ref())
            {
                physical.push(p);
            }
        }
        let predicate = (!physical.is_empty()).then(|| conjunction(physical));
        let keep = match &predicate {
            Some(p) => match PruningPredicateBuilder::new()
                .with_file_schema(self.schema.clone())
                .with_max_in_list_size(state.config_options().execution.parquet.max_in_list_size)
                .build(p.clone())
            {
                Some(pruning) => self.keep(&pruning)?,
                None => vec![true; self.files.len()],
            },
            None => vec![true; self.files.len()],
        };
        let kept: Vec<(&ScanFile, ScannedFile)> = self
            .files
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(file, _)| {
                let meta = ObjectMeta {
                    location: file.location.clone(),
                    last_modified: chrono::DateTime::from_timestamp_millis(file.modified_ms)
                        .unwrap_or_default(),
                    size: file.size,
                    e_tag: None,
                    version: None,
                };
                (file, (self.store.clone(), meta))
            })
            .collect();
        let projected = match projection {
            Some(p) => Arc::new(self.schema.project(p)?),
            None => self.schema.clone(),
        };
        if kept.is_empty() {
            return Ok(Arc::new(EmptyExec::new(projected)));
        }
        // The footers (with their page indexes) are in the cache from here on: each file's
        // exact statistics come from them.
        let scanned: Vec<ScannedFile> = kept.iter().map(|(_, s)| s.clone()).collect();
        super::page_index::warm(state, &scanned).await?;
        let cache = state.runtime_env().cache_manager.get_file_metadata_cache();
        let local;
        let derived = match state.config().get_extension::<FooterDerived>() {
            Some(d) => d,
            None => {
                local = Arc::new(FooterDerived::default());
                local.clone()
            }
        };
        let schema_key = schema_key(&self.file_schema);
        let (mut rows, mut bytes) = (0usize, 0usize);
        let mut files: Vec<PartitionedFile> = Vec::with_capacity(kept.len());
        for (file, (_, meta)) in kept {
            let mut f = PartitionedFile::new_from_meta(meta.clone())
                .with_partition_values(self.partition_values(file));
            if let Some(footer) = cached_footer(&cache, &meta) {
                let d = derived.get(
                    &meta.location,
                    &footer,
                    &self.file_schema,
                    schema_key,
                    &f.partition_values,
                )?;
                rows += d.stats.num_rows.get_value().copied().unwrap_or(0);
                // Set, not `with_statistics`: that copies every column's statistics to
                // append the partition columns', which the entry already holds.
                f.statistics = Some(d.stats.clone());
                f = f.with_arrow_schema(d.read_schema.clone());
            }
            bytes += file.size as usize;
            files.push(f);
        }
        let mut options = TableParquetOptions {
            global: state.config_options().execution.parquet.clone(),
            ..Default::default()
        };
        // Bloom filters are read (one seek and a parse per row group) only when a filter
        // reads the column they were written for.
        options.global.bloom_filter_on_read = filters.iter().any(|f| {
            f.column_refs()
                .iter()
                .any(|c| c.name.as_str() == BLOOM_COLUMN)
        });
        let runtime = state.runtime_env();
        let reader = super::local_read::ReaderFactory::new(
            runtime.object_store(&self.store)?,
            runtime.cache_manager.get_file_metadata_cache(),
            self.local_root.as_deref(),
        )?;
        let table_schema = TableSchema::builder(self.file_schema.clone())
            .with_table_partition_cols(self.partition_cols.clone())
            .build();
        let mut source = ParquetSource::new(table_schema)
            .with_table_parquet_options(options)
            .with_parquet_file_reader_factory(Arc::new(reader));
        if let Some(p) = predicate {
            source = source.with_predicate(p);
        }
        let config = FileScanConfigBuilder::new(self.store.clone(), Arc::new(source))
            .with_file_groups(vec![FileGroup::new(files)])
            .with_statistics(
                Statistics::new_unknown(&self.schema)
                    .with_num_rows(Precision::Inexact(rows))
                    .with_total_byte_size(Precision::Inexact(bytes)),
            )
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .build();
        Ok(DataSourceExec::from_data_source(config))
    }
}

/// The columns whose exact bounds each file's footer gives its scan: a `timestamp` sort
/// (the events list's `ORDER BY timestamp DESC LIMIT n`) reads the files newest first by
/// them and its dynamic filter skips whole files by them.
pub(crate) const FOOTER_STATISTICS: &[&str] = &["timestamp"];

fn cached_footer(
    cache: &Arc<datafusion::execution::cache::cache_manager::FileMetadataCache>,
    meta: &ObjectMeta,
) -> Option<Arc<ParquetMetaData>> {
    let entry = cache.get(&meta.location)?;
    if !entry.is_valid_for(meta) {
        return None;
    }
    entry
        .file_metadata
        .as_any()
        .downcast_ref::<CachedParquetMetaData>()
        .map(|m| m.parquet_metadata().clone())
}

/// A file's row count and the exact bounds of its [`FOOTER_STATISTICS`] columns, from
/// its row groups' statistics (a bound is left unknown unless every row group states it
/// exactly).
fn footer_statistics(footer: &ParquetMetaData, file_schema: &Schema) -> Statistics {
    use parquet::file::statistics::Statistics as Pq;
    let rows = footer.file_metadata().num_rows().max(0) as usize;
    let mut stats = Statistics::new_unknown(file_schema).with_num_rows(Precision::Exact(rows));
    let descr = footer.file_metadata().schema_descr();
    for name in FOOTER_STATISTICS {
        let (Ok(at), Some(leaf)) = (
            file_schema.index_of(name),
            descr
                .columns()
                .iter()
                .position(|c| c.path().string() == *name),
        ) else {
            continue;
        };
        let DataType::Timestamp(TimeUnit::Microsecond, tz) = file_schema.field(at).data_type()
        else {
            continue;
        };
        // The stored integers are microseconds only if the file says so.
        let micros = matches!(
            descr.column(leaf).logical_type_ref(),
            Some(parquet::basic::LogicalType::Timestamp(t))
                if matches!(t.unit, parquet::basic::TimeUnit::MICROS)
        );
        if !micros {
            continue;
        }
        let mut bounds: Option<(i64, i64)> = None;
        let mut nulls = 0u64;
        let mut known = true;
        for rg in footer.row_groups() {
            match rg.column(leaf).statistics() {
                Some(Pq::Int64(v))
                    if v.min_is_exact() && v.max_is_exact() && v.null_count_opt().is_some() =>
                {
                    nulls += v.null_count_opt().unwrap_or(0);
                    if let (Some(lo), Some(hi)) = (v.min_opt(), v.max_opt()) {
                        bounds = Some(bounds.map_or((*lo, *hi), |(a, b)| (a.min(*lo), b.max(*hi))));
                    }
                }
                _ => known = false,
            }
        }
        if let (true, Some((lo, hi))) = (known, bounds) {
            let c = &mut stats.column_statistics[at];
            c.min_value = Precision::Exact(ScalarValue::TimestampMicrosecond(Some(lo), tz.clone()));
            c.max_value = Precision::Exact(ScalarValue::TimestampMicrosecond(Some(hi), tz.clone()));
            c.null_count = Precision::Exact(nulls as usize);
        }
    }
    stats
}

/// `stats` with a column for each partition value after the file's columns, as
/// DataFusion's `PartitionedFile::with_statistics` appends them: one value, never null.
fn with_partition_statistics(mut stats: Statistics, values: &[ScalarValue]) -> Statistics {
    use datafusion::common::ColumnStatistics;
    for v in values {
        stats.column_statistics.push(ColumnStatistics {
            null_count: Precision::Exact(0),
            max_value: Precision::Exact(v.clone()),
            min_value: Precision::Exact(v.clone()),
            distinct_count: Precision::Exact(1),
            sum_value: Precision::Absent,
            byte_size: v
                .data_type()
                .primitive_width()
                .map_or(Precision::Absent, |w| {
                    stats.num_rows.multiply(&Precision::Exact(w))
                }),
        });
    }
    stats
}

/// What a scan derives from each file's footer: the Arrow schema it reads the file with
/// and the file's statistics, kept while the footer is in the runtime's metadata cache
/// (a session config extension: one per query service).
///
/// DataFusion's Parquet opener derives a file's Arrow schema on every open, twice: from the
/// footer (decoding the Arrow schema embedded in it), then again after coercing strings to
/// views. At 10M events, a rare event's breakdown over 91 daily files spent 13 % of its
/// CPU there. Given the coerced schema ([`PartitionedFile::with_arrow_schema`]), the opener
/// converts with it as a hint and skips the embedded one.
#[derive(Debug, Default)]
pub(crate) struct FooterDerived {
    entries: std::sync::Mutex<FooterEntries>,
}

#[derive(Debug, Default)]
struct FooterEntries {
    by_path: std::collections::HashMap<object_store::path::Path, Derived>,
    /// The number of entries after the last sweep of entries whose footer is gone.
    swept_at: usize,
}

/// One file's [`FooterDerived`] entry.
#[derive(Debug, Clone)]
pub(crate) struct Derived {
    /// The footer it was derived from (a footer evicted and read again is a new one).
    footer: std::sync::Weak<ParquetMetaData>,
    /// [`schema_key`] of the table schema it was derived for.
    schema_key: u64,
    pub(crate) read_schema: SchemaRef,
    pub(crate) stats: Arc<Statistics>,
}

impl FooterDerived {
    /// The entry of the file at `path` whose footer is `footer`, derived for `file_schema`
    /// (whose [`schema_key`] is `key`); `partition_values` are the file's (fixed by its
    /// path), whose statistics follow the file's columns'.
    pub(crate) fn get(
        &self,
        path: &object_store::path::Path,
        footer: &Arc<ParquetMetaData>,
        file_schema: &Schema,
        key: u64,
        partition_values: &[ScalarValue],
    ) -> DFResult<Derived> {
        let fresh = |d: &Derived| {
            d.schema_key == key && d.footer.upgrade().is_some_and(|f| Arc::ptr_eq(&f, footer))
        };
        if let Some(d) = self.lock().by_path.get(path).filter(|d| fresh(d)) {
            return Ok(d.clone());
        }
        let d = Derived {
            footer: Arc::downgrade(footer),
            schema_key: key,
            read_schema: read_schema(footer, file_schema)?,
            stats: Arc::new(with_partition_statistics(
                footer_statistics(footer, file_schema),
                partition_values,
            )),
        };
        let mut entries = self.lock();
        entries.by_path.insert(path.clone(), d.clone());
        // Entries outlive their footers when the cache evicts them or compaction removes
        // their files: swept whenever the map has doubled since the last sweep.
        if entries.by_path.len() > 2 * entries.swept_at + 64 {
            entries.by_path.retain(|_, d| d.footer.strong_count() > 0);
            entries.swept_at = entries.by_path.len();
        }
        Ok(d)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FooterEntries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A key of the table schema's columns and types: what a [`Derived`] depends on.
fn schema_key(schema: &Schema) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for f in schema.fields() {
        f.name().hash(&mut h);
        f.data_type().hash(&mut h);
    }
    h.finish()
}

/// The Arrow schema a scan reads the file with: the one its footer gives, with the ids
/// fixed where they are variable-length ([`variable_length_ids`]), strings and binary
/// coerced as DataFusion's opener coerces them to the table's types (views), and no
/// metadata.
///
/// The opener converts the file's whole Parquet schema with this one as a hint on every
/// open, copying and comparing each field's metadata (a `hedgerow.property` key on every
/// property column); nothing past the scan reads it (batches take the table's fields).
fn read_schema(footer: &ParquetMetaData, file_schema: &Schema) -> DFResult<SchemaRef> {
    let schema = match variable_length_ids(footer, file_schema)? {
        Some(s) => s,
        None => Arc::new(parquet::arrow::parquet_to_arrow_schema(
            footer.file_metadata().schema_descr(),
            footer.file_metadata().key_value_metadata(),
        )?),
    };
    let schema =
        match datafusion::datasource::physical_plan::parquet::apply_file_schema_type_coercions(
            file_schema,
            &schema,
        ) {
            Some(coerced) => coerced,
            None => schema.as_ref().clone(),
        };
    Ok(Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_metadata(Default::default()))
            .collect::<Vec<_>>(),
    )))
}

/// The Arrow schema to read a file with whose ids are variable-length binary, or `None`
/// for a file whose ids are 16-byte values (every file our writers write).
///
/// delta-rs's DELETE (GDPR erasure) rewrites files with its own writer, which stores the
/// ids as plain binary and declares them `BinaryView` in the file's Arrow schema; DataFusion
/// cannot cast a view to `FixedSizeBinary(16)`, but it casts `Binary`. Such a file is read
/// with its schema saying `Binary` for those columns until compaction rewrites it.
fn variable_length_ids(
    footer: &ParquetMetaData,
    file_schema: &Schema,
) -> DFResult<Option<SchemaRef>> {
    use parquet::basic::Type as Physical;
    let descr = footer.file_metadata().schema_descr();
    // Only where the table reads 16 bytes: a table with text ids reads text.
    let variable = descr.columns().iter().any(|c| {
        let name = c.path().string();
        ID_COLUMNS.contains(&name.as_str())
            && c.physical_type() == Physical::BYTE_ARRAY
            && file_schema
                .field_with_name(&name)
                .is_ok_and(|f| matches!(f.data_type(), DataType::FixedSizeBinary(16)))
    });
    if !variable {
        return Ok(None);
    }
    let schema = parquet::arrow::parquet_to_arrow_schema(
        descr,
        footer.file_metadata().key_value_metadata(),
    )?;
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::BinaryView | DataType::LargeBinary
                if ID_COLUMNS.contains(&f.name().as_str()) =>
            {
                f.as_ref().clone().with_data_type(DataType::Binary)
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    Ok(Some(Arc::new(Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    ))))
}

/// The files' Delta statistics and partition values, for [`PruningPredicate::prune`].
///
/// A bound is what the log says with one correction: timestamps are written to the log in
/// whole milliseconds (truncated), so a maximum is taken up to the end of its millisecond.
struct FileStats<'a> {
    provider: &'a FilesProvider,
    files: &'a [ScanFile],
}

impl FileStats<'_> {
    fn bound(&self, column: &Column, key: &str, max: bool) -> Option<ArrayRef> {
        let field = self.provider.schema.field_with_name(column.name()).ok()?;
        let values: Vec<ScalarValue> = self
            .files
            .iter()
            .map(|file| {
                if let Some(i) = self
                    .provider
                    .partition_cols
                    .iter()
                    .position(|p| p.name() == column.name())
                {
                    return self.provider.partition_values(file)[i].clone();
                }
                file.stats
                    .as_ref()
                    .and_then(|s| s.get(key)?.get(column.name()))
                    .and_then(|v| scalar_of(v, field.data_type(), max))
                    .unwrap_or_else(|| {
                        ScalarValue::try_from(field.data_type()).unwrap_or(ScalarValue::Null)
                    })
            })
            .collect();
        if values.iter().all(ScalarValue::is_null) {
            return None;
        }
        ScalarValue::iter_to_array(values).ok()
    }
}

/// A Delta statistics value as a scalar of `t`; `None` when it cannot be read as one.
fn scalar_of(v: &serde_json::Value, t: &DataType, max: bool) -> Option<ScalarValue> {
    Some(match t {
        DataType::Utf8View => ScalarValue::Utf8View(Some(v.as_str()?.to_string())),
        DataType::Utf8 => ScalarValue::Utf8(Some(v.as_str()?.to_string())),
        DataType::Int64 => ScalarValue::Int64(Some(v.as_i64()?)),
        DataType::Int32 => ScalarValue::Int32(Some(i32::try_from(v.as_i64()?).ok()?)),
        DataType::Float64 => ScalarValue::Float64(Some(v.as_f64()?)),
        DataType::Boolean => ScalarValue::Boolean(Some(v.as_bool()?)),
        DataType::Date32 => {
            let d = chrono::NaiveDate::parse_from_str(v.as_str()?, "%Y-%m-%d").ok()?;
            ScalarValue::Date32(Some((d - chrono::NaiveDate::default()).num_days() as i32))
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let t = chrono::DateTime::parse_from_rfc3339(v.as_str()?).ok()?;
            let micros = t.timestamp_micros() + if max { 999 } else { 0 };
            ScalarValue::TimestampMicrosecond(Some(micros), tz.clone())
        }
        _ => return None,
    })
}

impl PruningStatistics for FileStats<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bound(column, "minValues", false)
    }
    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bound(column, "maxValues", true)
    }
    fn num_containers(&self) -> usize {
        self.files.len()
    }
    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        if self
            .provider
            .partition_cols
            .iter()
            .any(|p| p.name() == column.name())
        {
            return None;
        }
        let counts: UInt64Array = self
            .files
            .iter()
            .map(|f| {
                f.stats
                    .as_ref()
                    .and_then(|s| s.get("nullCount")?.get(column.name())?.as_u64())
            })
            .collect();
        (datafusion::arrow::array::Array::null_count(&counts) < counts.len())
            .then(|| Arc::new(counts) as ArrayRef)
    }
    fn row_counts(&self) -> Option<ArrayRef> {
        let counts: UInt64Array = self
            .files
            .iter()
            .map(|f| f.stats.as_ref().and_then(|s| s.get("numRecords")?.as_u64()))
            .collect();
        Some(Arc::new(counts))
    }
    fn contained(
        &self,
        _column: &Column,
        _values: &std::collections::HashSet<ScalarValue>,
    ) -> Option<BooleanArray> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Event;
    use crate::storage::schema::events_to_batch;
    use crate::storage::table::{EventsTable, TableConfig, team_files};
    use chrono::{TimeZone, Utc};
    use datafusion::logical_expr::{col, lit};
    use datafusion::prelude::SessionContext;

    #[test]
    fn a_log_timestamp_bounds_its_whole_millisecond() {
        let t = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        let v = serde_json::json!("2024-03-01T10:00:00.123Z");
        let at = |max| match scalar_of(&v, &t, max) {
            Some(ScalarValue::TimestampMicrosecond(Some(m), _)) => m,
            other => panic!("{other:?}"),
        };
        let ms = Utc
            .with_ymd_and_hms(2024, 3, 1, 10, 0, 0)
            .unwrap()
            .timestamp_micros()
            + 123_000;
        assert_eq!(at(false), ms);
        assert_eq!(at(true), ms + 999);
        assert_eq!(
            scalar_of(&serde_json::json!(3), &DataType::Utf8View, false),
            None
        );
    }

    /// Two days of one project and a day of another: a filter on time leaves the other
    /// day's file out of the plan, the other project's file is never in it, and each file
    /// carries its exact time bounds from its footer.
    #[tokio::test]
    async fn files_are_pruned_by_the_log_and_carry_their_footers_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let url = url::Url::from_directory_path(dir.path().join("events")).unwrap();
        let table = EventsTable::open(TableConfig::new(url)).await.unwrap();
        let at = |d, h, us| {
            Utc.with_ymd_and_hms(2024, 3, d, h, 0, 0).unwrap() + chrono::TimeDelta::microseconds(us)
        };
        let event = |ts| Event {
            uuid: uuid::Uuid::now_v7(),
            event: "$pageview".into(),
            distinct_id: "a".into(),
            timestamp: ts,
            created_at: Utc::now(),
            properties: Default::default(),
        };
        let events = [
            (1, event(at(1, 9, 5))),
            (1, event(at(1, 17, 123_456))),
            (1, event(at(2, 8, 0))),
            (2, event(at(2, 9, 0))),
        ];
        let batch = events_to_batch(
            events.iter().map(|(t, e)| (TeamId(*t), e)),
            |_, _| None,
            &Default::default(),
        );
        table.append(batch, 1).await.unwrap();
        let t = table.current().await;
        let ctx = SessionContext::new();
        let store = deltalake::logstore::LogStore::object_store_url(t.log_store().as_ref());
        ctx.runtime_env()
            .register_object_store(store.as_ref(), t.log_store().object_store(None));
        let provider = FilesProvider::new(
            TeamId(1),
            &t.snapshot().unwrap().snapshot().arrow_schema(),
            store,
            team_files(&t, TeamId(1)).unwrap().files,
        );
        let state = ctx.state();
        let scan = async |filters: Vec<Expr>| {
            let plan = provider.scan(&state, None, &filters, None).await.unwrap();
            super::super::page_index::scanned_files(&plan).unwrap()
        };
        assert_eq!(scan(vec![]).await.len(), 2);
        let day2 = ScalarValue::TimestampMicrosecond(
            Some(at(2, 0, 0).timestamp_micros()),
            Some("UTC".into()),
        );
        let late = scan(vec![col("timestamp").gt_eq(lit(day2))]).await;
        assert_eq!(late.len(), 1);
        assert!(
            late[0]
                .1
                .location
                .as_ref()
                .contains("event_date=2024-03-02")
        );
        // The last row of March 1 is at 17:00:00.123456: the log says .123, the bound it is
        // taken to is .123999, so a filter just after the last row leaves the day out, and
        // one just before it keeps it.
        let after = |us| {
            let ts = at(1, 17, us).timestamp_micros();
            vec![col("timestamp").gt(lit(ScalarValue::TimestampMicrosecond(
                Some(ts),
                Some("UTC".into()),
            )))]
        };
        assert_eq!(scan(after(123_455)).await.len(), 2);
        assert_eq!(scan(after(123_999)).await.len(), 1);
        // Exact bounds from the footer.
        let plan = provider.scan(&state, None, &[], None).await.unwrap();
        let config = plan
            .downcast_ref::<DataSourceExec>()
            .and_then(|e| {
                e.data_source()
                    .downcast_ref::<datafusion::datasource::physical_plan::FileScanConfig>()
            })
            .unwrap();
        let ts_at = provider.schema.index_of("timestamp").unwrap();
        let mut bounds: Vec<(ScalarValue, ScalarValue, usize)> = config
            .file_groups
            .iter()
            .flat_map(|g| g.files())
            .map(|f| {
                let s = f.statistics.as_ref().unwrap();
                let c = &s.column_statistics[ts_at];
                (
                    c.min_value.get_value().unwrap().clone(),
                    c.max_value.get_value().unwrap().clone(),
                    *s.num_rows.get_value().unwrap(),
                )
            })
            .collect();
        bounds.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        let ts = |d, h, us| {
            ScalarValue::TimestampMicrosecond(
                Some(at(d, h, us).timestamp_micros()),
                Some("UTC".into()),
            )
        };
        assert_eq!(
            bounds,
            vec![
                (ts(1, 9, 5), ts(1, 17, 123_456), 2),
                (ts(2, 8, 0), ts(2, 8, 0), 1)
            ]
        );

        // Each file is read with the schema its footer gives, strings coerced to views as
        // the opener would coerce them, derived once while the footer stays cached.
        let file = &config.file_groups[0].files()[0];
        let read = file.arrow_schema.clone().unwrap();
        assert_eq!(
            read.field_with_name("event").unwrap().data_type(),
            &DataType::Utf8View
        );
        let cache = state.runtime_env().cache_manager.get_file_metadata_cache();
        let footer = cached_footer(&cache, &file.object_meta).unwrap();
        let derived = FooterDerived::default();
        let key = schema_key(&provider.file_schema);
        let path = &file.object_meta.location;
        let get = |footer: &Arc<ParquetMetaData>, key| {
            derived
                .get(path, footer, &provider.file_schema, key, &[])
                .unwrap()
                .read_schema
        };
        let first = get(&footer, key);
        assert_eq!(first, read);
        assert!(Arc::ptr_eq(&first, &get(&footer, key)), "derived once");
        // A footer read again (evicted, then cached anew) or another table schema: derived
        // again.
        let reloaded = Arc::new(footer.as_ref().clone());
        let again = get(&reloaded, key);
        assert!(!Arc::ptr_eq(&first, &again));
        assert_eq!(first, again);
        assert!(!Arc::ptr_eq(&again, &get(&reloaded, key ^ 1)));
        // Entries whose footer is gone are swept as the map grows.
        for i in 0..300 {
            let gone = Arc::new(footer.as_ref().clone());
            derived
                .get(
                    &object_store::path::Path::from(format!("f{i}")),
                    &gone,
                    &provider.file_schema,
                    key,
                    &[],
                )
                .unwrap();
        }
        let left = derived.lock().by_path.len();
        assert!(left < 150, "{left} entries left");
        assert!(
            derived.lock().by_path.contains_key(path),
            "an entry whose footer is cached stays"
        );
    }
}
