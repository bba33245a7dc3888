//! Folding person-id overrides into the files: merged people's events get the surviving
//! person's id.

use super::*;

impl EventsTable {
    /// Rewrites `person_id` from each key of `map` to its value in project `team`'s rows
    /// (how person merges are folded into the files). Chains in the map are followed (a→b,
    /// b→c rewrites a to c); identities are ignored; a cycle is refused. One Delta update
    /// (`CASE person_id WHEN old THEN new … END`) per `IDS_PER_COMMIT` entries, each
    /// rewriting only the files holding one of its old ids. The replaced files stay until
    /// the normal vacuum.
    pub async fn rewrite_person_ids(
        &self,
        team: TeamId,
        map: &HashMap<String, String>,
    ) -> Result<RewriteStats, StorageError> {
        self.rewrite_person_ids_chunked(team, map, IDS_PER_COMMIT)
            .await
    }

    pub(super) async fn rewrite_person_ids_chunked(
        &self,
        team: TeamId,
        map: &HashMap<String, String>,
        ids_per_commit: usize,
    ) -> Result<RewriteStats, StorageError> {
        let resolved: Vec<(&str, &str)> = resolve_person_map(map)?.into_iter().collect();
        let mut stats = RewriteStats::default();
        if resolved.is_empty() {
            return Ok(stats);
        }
        let mut guard = self.table.lock().await;
        let files_before = file_sizes(&guard)?;
        let version_before = guard.version().map_or(-1, |v| v as i64);
        for chunk in resolved.chunks(ids_per_commit.max(1)) {
            let olds: Vec<Expr> = chunk.iter().map(|(old, _)| lit(*old)).collect();
            let predicate = col("team_id")
                .eq(lit(team.0))
                .and(col("person_id").in_list(olds, false));
            let rewrite = Expr::Case(Case::new(
                Some(Box::new(col("person_id"))),
                chunk
                    .iter()
                    .map(|(old, new)| (Box::new(lit(*old)), Box::new(lit(*new))))
                    .collect(),
                Some(Box::new(col("person_id"))),
            ));
            let v0 = guard.version();
            let (table, metrics) = guard
                .clone()
                .update()
                .with_predicate(predicate)
                .with_update("person_id", rewrite)
                .with_writer_properties(self.writer_properties())
                .await?;
            *guard = table;
            self.publish(&guard);
            if guard.version() != v0 {
                stats.commits += 1;
            }
            stats.rows_rewritten += metrics.num_updated_rows as u64;
            stats.files_rewritten += metrics.num_removed_files as u64;
            stats.files_written += metrics.num_added_files as u64;
        }
        let version_after = guard.version().map_or(-1, |v| v as i64);
        let files: Vec<String> = file_sizes(&guard)?
            .into_keys()
            .filter(|p| !files_before.contains_key(p))
            .chain((version_before + 1..=version_after).map(log_entry))
            .collect();
        self.fsync_local(files, Vec::new()).await?;
        debug!(team = team.0, ?stats, "rewrote person ids");
        Ok(stats)
    }
}

/// `map` with chains followed (a→b and b→c give a→c) and identities dropped, sorted.
pub(super) fn resolve_person_map(
    map: &HashMap<String, String>,
) -> Result<BTreeMap<&str, &str>, StorageError> {
    let mut out = BTreeMap::new();
    for (old, new) in map {
        let mut target = new.as_str();
        let mut hops = 0;
        while let Some(next) = map.get(target) {
            if next == target {
                break;
            }
            target = next;
            hops += 1;
            if hops > map.len() {
                return Err(StorageError::Config(format!(
                    "the person id map has a cycle through {old}"
                )));
            }
        }
        if target != old {
            out.insert(old.as_str(), target);
        }
    }
    Ok(out)
}
