//! Keeps each Parquet file's page index in the runtime's file-metadata cache.
//!
//! DataFusion's Parquet opener reads a file's footer without the page index (the cache then
//! holds the footer alone) and, when a predicate can use the index, reads and parses the
//! index bytes again for that one scan without caching them. Every query with a filter paid
//! that for every file it opened: at 2M events over 90 daily files, loading and parsing the
//! page indexes (and converting each file's schema a second time for the new metadata) was
//! about an eighth of a daily trend's CPU. A cache entry that already has the page index is
//! used as it is (the opener asks for the footer and gets the index with it), so loading
//! the index into the cache once per file, before the scan opens the files, removes that
//! work from every later query.

use std::sync::Arc;

use datafusion::catalog::Session;
use datafusion::common::Result as DFResult;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::physical_plan::parquet::metadata::DFParquetMetadata;
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::cache::cache_manager::CachedFileMetadataEntry;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectMeta;
use parquet::file::metadata::PageIndexPolicy;

/// Files whose index is read at once.
const CONCURRENCY: usize = 16;

/// A Parquet file a scan reads: its store and its object.
pub(crate) type ScannedFile = (ObjectStoreUrl, ObjectMeta);

/// Every file the Parquet scans of `plan` read, or None when a leaf of `plan` is neither
/// such a scan nor empty (so a caller checking the files cannot miss one).
pub(crate) fn scanned_files(plan: &Arc<dyn ExecutionPlan>) -> Option<Vec<ScannedFile>> {
    let mut files = Vec::new();
    let mut unlisted = false;
    plan.apply(|node| {
        if let Some(config) = node
            .downcast_ref::<DataSourceExec>()
            .and_then(|exec| exec.data_source().downcast_ref::<FileScanConfig>())
        {
            for file in config.file_groups.iter().flat_map(|g| g.files()) {
                files.push((config.object_store_url.clone(), file.object_meta.clone()));
            }
        } else if node.children().is_empty() && node.downcast_ref::<EmptyExec>().is_none() {
            unlisted = true;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .ok()?;
    (!unlisted).then_some(files)
}

/// Loads into the cache the page index of every file of `files` whose cached metadata
/// lacks it (or that is not cached yet).
pub(crate) async fn warm(state: &dyn Session, files: &[ScannedFile]) -> DFResult<()> {
    let runtime = state.runtime_env();
    let cache = runtime.cache_manager.get_file_metadata_cache();
    let wanted: Vec<ScannedFile> = files
        .iter()
        .filter(|(_, meta)| !has_page_index(cache.get(&meta.location), meta))
        .cloned()
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    futures::stream::iter(wanted)
        .map(|(url, meta)| {
            let runtime = runtime.clone();
            let cache = cache.clone();
            async move {
                let store = runtime.object_store(&url)?;
                DFParquetMetadata::new(store.as_ref(), &meta)
                    .with_file_metadata_cache(Some(cache))
                    .with_page_index_policy(Some(PageIndexPolicy::Optional))
                    .fetch_metadata()
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await
}

fn has_page_index(entry: Option<CachedFileMetadataEntry>, meta: &ObjectMeta) -> bool {
    use datafusion::datasource::physical_plan::parquet::metadata::CachedParquetMetaData;
    entry.is_some_and(|e| {
        e.is_valid_for(meta)
            && e.file_metadata
                .as_any()
                .downcast_ref::<CachedParquetMetaData>()
                .is_some_and(|m| {
                    let m = m.parquet_metadata();
                    m.column_index().is_some() && m.offset_index().is_some()
                })
    })
}
