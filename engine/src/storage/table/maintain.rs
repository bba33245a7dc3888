//! Keeping the table in shape: compaction of small files and vacuum of replaced ones.

use super::*;

impl EventsTable {
    /// Compacts every partition that has at least `min_files` files smaller than the target
    /// size, one partition per commit so appends wait at most one partition's rewrite.
    /// Readers see either the small files or the compacted one, never both and never none:
    /// the removes and the add are one Delta commit.
    pub async fn compact(&self, min_files: usize) -> Result<CompactStats, StorageError> {
        let candidates: Vec<(String, String)> = {
            let guard = self.table.lock().await;
            let mut small: BTreeMap<(String, String), usize> = BTreeMap::new();
            for f in guard.snapshot()?.log_data().iter() {
                if (f.size() as u64) >= self.cfg.target_file_bytes / 2 {
                    continue;
                }
                let pv = f.partition_values_map();
                let get = |k: &str| pv.get(k).cloned().flatten().unwrap_or_default();
                *small
                    .entry((get("team_id"), get("event_date")))
                    .or_default() += 1;
            }
            small
                .into_iter()
                .filter(|(_, n)| *n >= min_files.max(2))
                .map(|(k, _)| k)
                .collect()
        };
        let mut stats = CompactStats::default();
        for (team, date) in candidates {
            let mut guard = self.table.lock().await;
            let filters = [
                (
                    "team_id",
                    deltalake::kernel::schema::partitions::FilterOp::Eq,
                    deltalake::kernel::schema::partitions::FilterValue::Scalar(team.as_str()),
                ),
                (
                    "event_date",
                    deltalake::kernel::schema::partitions::FilterOp::Eq,
                    deltalake::kernel::schema::partitions::FilterValue::Scalar(date.as_str()),
                ),
            ];
            let (table, metrics) = guard
                .clone()
                .optimize()
                .with_filters(&filters)
                .with_target_size(NonZeroU64::new(self.cfg.target_file_bytes).expect("nonzero"))
                .with_writer_properties(self.writer_properties())
                .await?;
            *guard = table;
            self.publish(&guard);
            stats.partitions += 1;
            stats.files_removed += metrics.num_files_removed;
            stats.files_added += metrics.num_files_added;
        }
        Ok(stats)
    }

    /// Deletes files no snapshot younger than `retention` refers to.
    pub async fn vacuum(&self, retention: chrono::Duration) -> Result<usize, StorageError> {
        let mut guard = self.table.lock().await;
        let (table, metrics) = guard
            .clone()
            .vacuum()
            .with_retention_period(retention)
            .with_enforce_retention_duration(false)
            .await?;
        *guard = table;
        self.publish(&guard);
        Ok(metrics.files_deleted.len())
    }
}
