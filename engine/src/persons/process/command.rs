//! API commands (`PersonCommand`: delete, delete events or recordings, split), each a WAL
//! record of its own, applied in order with events.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::{CommandRecord, Persons};
use crate::model::PersonCommand;
use crate::model::{DistinctId, PersonUuid, TeamId};
use crate::persons::store::{Activity, NewTask, Op, PersonRow, Result};

impl Persons {
    /// Applies an API command (a WAL record of its own).
    pub fn command(&mut self, seq: u64, team: TeamId, rec: &CommandRecord) -> Result<()> {
        if seq <= self.applied {
            return Ok(());
        }
        // Commands read distinct ids from the store: write what is pending first.
        let prev = self.applied;
        self.commit(prev)?;
        let at = rec.at;
        let actor = rec.actor.as_str();
        match &rec.command {
            PersonCommand::Delete {
                ids,
                distinct_ids,
                delete_events,
            } => {
                let mut targets: BTreeSet<i64> = ids.iter().copied().collect();
                for d in distinct_ids {
                    if let Some(id) = self.lookup(team, d)? {
                        targets.insert(id);
                    }
                }
                for id in targets {
                    let Some(row) = self.load(team, id)?.map(|c| c.row.clone()) else {
                        continue;
                    };
                    let dids = self.store.distinct_ids(team, id)?;
                    // The deletion drops the person's activity (it may hold property
                    // values): what is logged about the deletion comes after it.
                    self.ops.push(Op::DeletePerson { team, id });
                    if *delete_events {
                        self.queue_task(team, &row, &dids, "events", actor, at)?;
                    }
                    self.ops.push(Op::Activity(Activity {
                        team,
                        person_id: id,
                        person_uuid: row.uuid,
                        activity: "deleted".into(),
                        actor: actor.to_owned(),
                        detail: json!({"distinct_ids_count": dids.len(), "delete_events": delete_events}),
                        at,
                    }));
                    self.uncache(id);
                    self.dirty.remove(&id);
                    self.deleted.insert(id);
                }
            }
            PersonCommand::DeleteEvents { id } | PersonCommand::DeleteRecordings { id } => {
                let kind = if matches!(rec.command, PersonCommand::DeleteEvents { .. }) {
                    "events"
                } else {
                    "recordings"
                };
                if let Some(row) = self.load(team, *id)?.map(|c| c.row.clone()) {
                    let dids = self.store.distinct_ids(team, *id)?;
                    self.queue_task(team, &row, &dids, kind, actor, at)?;
                }
            }
            PersonCommand::Split { id } => {
                if let Some(row) = self.load(team, *id)?.map(|c| c.row.clone()) {
                    let mut dids = self.store.distinct_ids(team, *id)?;
                    // The id the person was made from keeps it (its uuid is that id's), so
                    // no new person can take the same uuid.
                    if let Some(i) = dids
                        .iter()
                        .position(|d| PersonUuid::of(team, d) == row.uuid)
                    {
                        let keep = dids.remove(i);
                        dids.insert(0, keep);
                    }
                    let mut split = Vec::new();
                    for d in dids.iter().skip(1) {
                        let new = self.create(team, d, row.created_at, false, actor, at);
                        split.push(json!({"distinct_id": d, "person_id": new}));
                    }
                    self.ops.push(Op::Activity(Activity {
                        team,
                        person_id: *id,
                        person_uuid: row.uuid,
                        activity: "split".into(),
                        actor: actor.to_owned(),
                        detail: json!({"kept_distinct_id": dids.first(), "new_persons": split}),
                        at,
                    }));
                }
            }
        }
        self.applied = seq;
        self.records_pending += 1;
        self.commit(seq)
    }

    fn queue_task(
        &mut self,
        team: TeamId,
        row: &PersonRow,
        dids: &[DistinctId],
        kind: &str,
        actor: &str,
        at: DateTime<Utc>,
    ) -> Result<()> {
        let mut ids: BTreeSet<String> = BTreeSet::new();
        ids.insert(row.uuid.to_string());
        for u in self.store.merged_into(team, row.uuid)? {
            ids.insert(u.to_string());
        }
        for d in dids {
            ids.insert(PersonUuid::of(team, d).to_string());
        }
        let mut scrub: Vec<String> = dids.iter().map(|d| d.as_str().to_owned()).collect();
        scrub.extend(
            row.properties
                .values()
                .filter_map(|v| v.as_str())
                .filter(|s| s.chars().count() >= 4)
                .map(str::to_owned),
        );
        self.ops.push(Op::Task(NewTask {
            team,
            kind: kind.to_owned(),
            person_id: row.id,
            person_uuid: row.uuid,
            event_person_ids: ids.into_iter().collect(),
            scrub,
            actor: actor.to_owned(),
            at,
        }));
        self.ops.push(Op::Activity(Activity {
            team,
            person_id: row.id,
            person_uuid: row.uuid,
            activity: format!("{kind}_deletion_queued"),
            actor: actor.to_owned(),
            detail: json!({}),
            at,
        }));
        Ok(())
    }
}
