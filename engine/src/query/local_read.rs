//! How a scan reads the table's Parquet files: footers (and page indexes) through the
//! runtime's file-metadata cache as DataFusion's cached reader does, and the data pages of a
//! table on the local file system with a positioned read on the scan's own thread.
//!
//! `object_store`'s local store hands every read to tokio's blocking pool (a thread switch
//! there and back) and opens the file again for each call. A scan over 91 daily files makes
//! several reads per file, each a few KB to a few MB already in the page cache, so the
//! switches cost more than the reads: at 10M events they were a fifth of the fixed cost of a
//! filtered query over the quarter (docs/architecture.md, "Reading local files in place").
//! Here each file is opened once per scan and read with `pread` where the scan runs, as
//! ClickHouse and DuckDB read their local parts. A table on an object store is read through
//! the store, as before.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::common::Result as DFResult;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::metadata::DFParquetMetadata;
use datafusion::datasource::physical_plan::parquet::{
    CachedParquetFileReaderFactory, ParquetFileMetrics, ParquetFileReaderFactory,
};
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::FutureExt;
use futures::future::BoxFuture;
use object_store::ObjectStore;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;

/// The scan's [`ParquetFileReaderFactory`]: [`LocalFileReader`]s when the table is a local
/// directory, DataFusion's cached reader otherwise.
#[derive(Debug)]
pub(crate) struct ReaderFactory {
    store: Arc<dyn ObjectStore>,
    cache: Arc<FileMetadataCache>,
    /// The local store of the table's directory (it maps a file's location to its path as
    /// the store itself does), or `None` for a table on an object store.
    local: Option<Arc<object_store::local::LocalFileSystem>>,
}

impl ReaderFactory {
    /// `root`: the table's directory when it is on the local file system.
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        cache: Arc<FileMetadataCache>,
        root: Option<&std::path::Path>,
    ) -> DFResult<Self> {
        let local = match root {
            Some(root) => Some(Arc::new(
                object_store::local::LocalFileSystem::new_with_prefix(root)?,
            )),
            None => None,
        };
        Ok(Self {
            store,
            cache,
            local,
        })
    }
}

impl ParquetFileReaderFactory for ReaderFactory {
    fn create_reader(
        &self,
        partition_index: usize,
        file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> DFResult<Box<dyn AsyncFileReader + Send>> {
        let Some(local) = &self.local else {
            return CachedParquetFileReaderFactory::new(self.store.clone(), self.cache.clone())
                .create_reader(partition_index, file, metadata_size_hint, metrics);
        };
        let location = &file.object_meta.location;
        Ok(Box::new(LocalFileReader {
            metrics: ParquetFileMetrics::new(partition_index, location.as_ref(), metrics),
            path: local.path_to_filesystem(location)?,
            opened: None,
            store: self.store.clone(),
            cache: self.cache.clone(),
            metadata_size_hint,
            file,
        }))
    }
}

/// One scan's reader of one local file (see the module's documentation).
struct LocalFileReader {
    metrics: ParquetFileMetrics,
    path: PathBuf,
    /// Opened at the first read of data.
    opened: Option<File>,
    store: Arc<dyn ObjectStore>,
    cache: Arc<FileMetadataCache>,
    metadata_size_hint: Option<usize>,
    file: PartitionedFile,
}

impl LocalFileReader {
    fn read(&mut self, range: Range<u64>) -> parquet::errors::Result<Bytes> {
        let external = |e: std::io::Error, path: &PathBuf| {
            ParquetError::External(format!("reading {}: {e}", path.display()).into())
        };
        let len = usize::try_from(range.end.saturating_sub(range.start))
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        let file = match self.opened.take() {
            Some(file) => file,
            None => File::open(&self.path).map_err(|e| external(e, &self.path))?,
        };
        let mut buf = vec![0u8; len];
        let read = file.read_exact_at(&mut buf, range.start);
        self.opened = Some(file);
        read.map_err(|e| external(e, &self.path))?;
        self.metrics.bytes_scanned.add(len);
        Ok(Bytes::from(buf))
    }
}

impl AsyncFileReader for LocalFileReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        let read = self.read(range);
        async move { read }.boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        let read = ranges.into_iter().map(|r| self.read(r)).collect();
        async move { read }.boxed()
    }

    /// From the cache, or read once into it (the footer and page index of a file not yet
    /// cached come through the store, as DataFusion's cached reader reads them).
    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let meta = &self.file.object_meta;
            DFParquetMetadata::new(self.store.as_ref(), meta)
                .with_file_metadata_cache(Some(self.cache.clone()))
                .with_metadata_size_hint(self.metadata_size_hint)
                .with_page_index_policy(options.map(|o| o.column_index_policy()))
                .fetch_metadata()
                .await
                .map_err(|e| {
                    ParquetError::General(format!("reading the footer of {}: {e}", meta.location))
                })
        }
        .boxed()
    }
}

impl Drop for LocalFileReader {
    /// As DataFusion's reader: the share of the file the scan read, for `--explain`.
    fn drop(&mut self) {
        let ratio = &self.metrics.scan_efficiency_ratio;
        ratio.add_part(self.metrics.bytes_scanned.value());
        ratio.set_total(self.file.object_meta.size as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::execution::cache::cache_manager::CacheManagerConfig;
    use futures::TryStreamExt;
    use object_store::ObjectStoreExt;
    use parquet::arrow::ParquetRecordBatchStreamBuilder;

    /// A file read through the local reader gives what was written, its footer lands in
    /// the cache, and a file that went meanwhile is an error that names it.
    #[tokio::test]
    async fn reads_a_local_file_in_place_and_caches_its_footer() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("team_id=1")).unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from_iter_values(0..10_000))],
        )
        .unwrap();
        let path = dir.path().join("team_id=1/a.parquet");
        let mut w =
            parquet::arrow::ArrowWriter::try_new(File::create(&path).unwrap(), schema, None)
                .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();

        let store: Arc<dyn ObjectStore> =
            Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap());
        let cache = datafusion::execution::cache::cache_manager::CacheManager::try_new(
            &CacheManagerConfig::default(),
        )
        .unwrap()
        .get_file_metadata_cache();
        let factory = ReaderFactory::new(store.clone(), cache.clone(), Some(dir.path())).unwrap();
        let location = object_store::path::Path::from("team_id=1/a.parquet");
        let meta = store.head(&location).await.unwrap();
        let metrics = ExecutionPlanMetricsSet::new();
        let reader: Box<dyn AsyncFileReader> = factory
            .create_reader(
                0,
                PartitionedFile::new_from_meta(meta.clone()),
                None,
                &metrics,
            )
            .unwrap();
        let batches: Vec<RecordBatch> = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .unwrap()
            .build()
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let read: Vec<i64> = batches
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(read, (0..10_000).collect::<Vec<_>>());
        assert!(cache.get(&location).is_some(), "the footer is cached");

        std::fs::remove_file(&path).unwrap();
        let mut reader = factory
            .create_reader(0, PartitionedFile::new_from_meta(meta), None, &metrics)
            .unwrap();
        let err = reader.get_bytes(0..4).await.unwrap_err().to_string();
        assert!(err.contains("a.parquet"), "{err}");
    }
}
