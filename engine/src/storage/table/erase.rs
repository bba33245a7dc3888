//! Erasing people's events (GDPR): deletes, then every file and log entry that still
//! holds them.

use super::*;

impl EventsTable {
    /// Erases every event of `person_ids` in project `team` from storage, with its history:
    ///
    /// 1. deletes the rows (`team_id = team AND person_id IN (…)`, one Delta delete per
    ///    `IDS_PER_COMMIT` ids) under the commit lock, rewriting the files that held them;
    /// 2. deletes, now, every file the snapshot no longer references: the rewritten ones,
    ///    files earlier compactions replaced, uncommitted leftovers (a vacuum with no
    ///    retention, then a sweep of whatever it left);
    /// 3. writes a checkpoint of the new version and deletes every other log entry, so no
    ///    commit, checkpoint or temporary file still carries the deleted files' statistics
    ///    (min/max values) or the delete's own predicate.
    ///
    /// The WAL position the table covers ([`Self::committed_seq`]) is unchanged. Idempotent:
    /// run again after a failure, steps 2–3 finish what an earlier run left, even when no row
    /// is left to delete. Readers holding an older snapshot may fail on a file deleted under
    /// them; their query errors rather than showing erased data.
    pub async fn delete_person_events(
        &self,
        team: TeamId,
        person_ids: &[String],
    ) -> Result<EraseStats, StorageError> {
        self.delete_person_events_chunked(team, person_ids, IDS_PER_COMMIT)
            .await
    }

    pub(super) async fn delete_person_events_chunked(
        &self,
        team: TeamId,
        person_ids: &[String],
        ids_per_commit: usize,
    ) -> Result<EraseStats, StorageError> {
        let mut ids: Vec<&str> = person_ids.iter().map(String::as_str).collect();
        ids.sort_unstable();
        ids.dedup();
        let started = Instant::now();
        let mut guard = self.table.lock().await;
        self.settle(&mut guard).await?;
        let seq_before = seq_of(&guard).await?;
        let files_before = file_sizes(&guard)?;
        let mut stats = EraseStats::default();
        // A table created before 16-byte ids holds them as text; since, as binary.
        let text_ids = guard
            .snapshot()?
            .snapshot()
            .arrow_schema()
            .field_with_name("person_id")
            .is_ok_and(|f| {
                matches!(
                    f.data_type(),
                    arrow::datatypes::DataType::Utf8 | arrow::datatypes::DataType::Utf8View
                )
            });
        let id_lit = |id: &str| {
            if text_ids {
                lit(id)
            } else {
                // Not a UUID: no row holds it.
                let bytes = crate::storage::ids::parse(id).map(|b| b.to_vec());
                lit(deltalake::datafusion::scalar::ScalarValue::Binary(bytes))
            }
        };
        for chunk in ids.chunks(ids_per_commit.max(1)) {
            let predicate = col("team_id")
                .eq(lit(team.0))
                .and(col("person_id").in_list(chunk.iter().map(|id| id_lit(id)).collect(), false));
            let (table, metrics) = guard
                .clone()
                .delete()
                .with_predicate(predicate)
                .with_writer_properties(self.writer_properties(&Default::default(), false))
                .await?;
            *guard = table;
            self.publish(&guard);
            stats.rows_deleted += metrics.num_deleted_rows.unwrap_or(0) as u64;
            stats.files_rewritten += metrics.num_removed_files as u64;
        }

        crate::faults::point("erase.deleted");
        // Tombstones expire when older than now minus the retention: a negative retention
        // expires those made this very millisecond too, and tolerates some clock skew.
        let (table, metrics) = guard
            .clone()
            .vacuum()
            .with_mode(VacuumMode::Full)
            .with_retention_period(chrono::Duration::days(-1))
            .with_enforce_retention_duration(false)
            .await?;
        *guard = table;
        self.publish(&guard);
        let mut deleted = metrics.files_deleted;
        deleted.extend(self.delete_unreferenced_files(&guard).await?);
        stats.files_vacuumed = deleted.len() as u64;

        crate::faults::point("erase.vacuumed");
        let (removed, kept) = self.erase_log_history(&guard).await?;
        stats.log_files_removed = removed;
        // The handle's log segment names the entries just deleted: start from the checkpoint.
        *guard = self.load_fresh().await?;
        self.publish(&guard);

        let new_files: Vec<String> = file_sizes(&guard)?
            .into_keys()
            .filter(|p| !files_before.contains_key(p))
            .chain(kept)
            .collect();
        let mut dirs: Vec<String> = deleted
            .iter()
            .filter_map(|p| p.rsplit_once('/').map(|(d, _)| d.to_owned()))
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs.push("_delta_log".to_owned());
        self.fsync_local(new_files, dirs).await?;

        let seq_after = seq_of(&guard).await?;
        if seq_after != seq_before {
            return Err(StorageError::Invariant(format!(
                "the erasure changed the committed WAL position from {seq_before} to {seq_after}"
            )));
        }
        info!(
            team = team.0,
            people = ids.len(),
            ?stats,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "erased people's events"
        );
        Ok(stats)
    }

    /// Deletes the data files no version of the log refers to: neither the current snapshot
    /// nor an unexpired tombstone (which a reader of an older version may still read and
    /// vacuum deletes in its time). Only a write interrupted before its commit leaves such
    /// files. Called when the table opens, before any write of this process; returns how
    /// many went.
    pub async fn delete_uncommitted_files(&self) -> Result<usize, StorageError> {
        let guard = self.table.lock().await;
        let mut known = std::collections::HashSet::new();
        {
            let mut tombstones = guard.snapshot()?.all_tombstones(guard.log_store().as_ref());
            while let Some(t) = tombstones.next().await.transpose()? {
                let p = t.path().into_owned();
                known.insert(percent_decode(&p));
                known.insert(p);
            }
        }
        let doomed = self.unreferenced_files(&guard, &known).await?;
        self.delete_files(&guard, &doomed).await?;
        Ok(doomed.len())
    }

    /// Deletes every object the snapshot does not reference, outside the log and other
    /// `_`/`.` directories (the writer lease lives in `_hedgerow`). The caller holds the commit
    /// lock, so no write of ours is in flight. Returns the deleted paths.
    pub(super) async fn delete_unreferenced_files(
        &self,
        table: &DeltaTable,
    ) -> Result<Vec<String>, StorageError> {
        let doomed = self.unreferenced_files(table, &Default::default()).await?;
        self.delete_files(table, &doomed).await?;
        Ok(doomed.iter().map(|p| p.to_string()).collect())
    }

    /// The objects outside `_`/`.` directories that neither `table`'s snapshot nor `also`
    /// names.
    async fn unreferenced_files(
        &self,
        table: &DeltaTable,
        also: &std::collections::HashSet<String>,
    ) -> Result<Vec<Path>, StorageError> {
        let live: std::collections::HashSet<String> = table
            .snapshot()?
            .log_data()
            .iter()
            .flat_map(|f| {
                let p = f.path().into_owned();
                [percent_decode(&p), p]
            })
            .collect();
        let store = table.log_store().object_store(None);
        let mut listing = store.list(None);
        let mut doomed = Vec::new();
        while let Some(meta) = listing.next().await.transpose()? {
            let loc = meta.location.as_ref();
            let top = loc.split('/').next().unwrap_or_default();
            if top.starts_with('_') || top.starts_with('.') {
                continue;
            }
            let decoded = percent_decode(loc);
            let named = |set: &std::collections::HashSet<String>| {
                set.contains(loc) || set.contains(&decoded)
            };
            if named(&live) || named(also) {
                continue;
            }
            doomed.push(meta.location);
        }
        Ok(doomed)
    }

    async fn delete_files(&self, table: &DeltaTable, paths: &[Path]) -> Result<(), StorageError> {
        let store = table.log_store().object_store(None);
        for p in paths {
            match store.delete(p).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Writes a checkpoint of `table`'s version `v`, then deletes every log entry except
    /// `v`'s commit and checkpoint and `_last_checkpoint` (and anything newer, which the
    /// commit lock rules out). Subdirectories of the log are left alone. Returns how many
    /// entries were deleted and the paths of those kept.
    pub(super) async fn erase_log_history(
        &self,
        table: &DeltaTable,
    ) -> Result<(u64, Vec<String>), StorageError> {
        let version = table.snapshot()?.version();
        create_checkpoint(table, None).await?;
        let commit = format!("{version:020}.json");
        let checkpoint = format!("{version:020}.checkpoint.parquet");
        let store = table.log_store().object_store(None);
        let log_dir = Path::from("_delta_log");
        let mut listing = store.list(Some(&log_dir));
        let (mut doomed, mut kept) = (Vec::new(), Vec::new());
        while let Some(meta) = listing.next().await.transpose()? {
            let Some(name) = meta.location.as_ref().strip_prefix("_delta_log/") else {
                continue;
            };
            if name.contains('/') {
                continue;
            }
            let newer = name
                .get(..20)
                .filter(|d| d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u64>().ok())
                .is_some_and(|v| v > version);
            if name == commit || name == checkpoint || name == "_last_checkpoint" || newer {
                kept.push(meta.location.to_string());
            } else {
                doomed.push(meta.location);
            }
        }
        drop(listing);
        if !kept.iter().any(|k| k.ends_with(&checkpoint)) {
            return Err(StorageError::Invariant(format!(
                "checkpoint {checkpoint} is not in the log after writing it; log history kept"
            )));
        }
        for p in &doomed {
            match store.delete(p).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok((doomed.len() as u64, kept))
    }
}
