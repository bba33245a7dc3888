//! The person state machine: applies events and API commands, in WAL order, to persons and
//! groups through a cache, and collects the changes for the next store commit.

mod command;
#[cfg(test)]
mod harness;
#[cfg(test)]
mod merge_model;

use crate::model::CommandRecord;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::store::{
    Activity, ChangeSet, GroupRow, Op, PersonRow, PersonStore, PersonWrite, Result,
};
use super::{PersonAction, PersonInput, apply_property_ops, is_mergeable_id};
use crate::model::{DistinctId, PersonUuid, TeamId};

/// What an event carries out of person processing.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamp {
    pub person_id: PersonUuid,
    /// The person's properties after this event; `None` for personless events. Events
    /// of a person that did not change in between share one snapshot.
    pub properties: Option<Arc<Map<String, Value>>>,
}

struct Cached {
    row: PersonRow,
    snapshot: Option<Arc<Map<String, Value>>>,
    /// What the cache counts for it ([`approx_bytes`] of its properties when it was loaded
    /// or last stored).
    bytes: usize,
}

/// About what a person's properties take in memory: a map entry, its key and its value
/// (strings by their length, nested values by their parts).
fn approx_bytes(map: &Map<String, Value>) -> usize {
    fn value(v: &Value) -> usize {
        match v {
            Value::String(s) => s.len(),
            Value::Array(a) => a.iter().map(|v| 32 + value(v)).sum(),
            Value::Object(m) => approx_bytes(m),
            _ => 0,
        }
    }
    map.iter().map(|(k, v)| 96 + k.len() + value(v)).sum()
}

impl Cached {
    /// The properties as they are now, copied once per change and shared by the stamps of
    /// one record (`Persons::process` drops it when the record is done).
    fn snapshot(&mut self) -> Arc<Map<String, Value>> {
        self.snapshot
            .get_or_insert_with(|| Arc::new(self.row.properties.clone()))
            .clone()
    }

    /// The properties as JSON text, for the person store.
    fn json(&self) -> Arc<str> {
        Arc::from(serde_json::to_string(&self.row.properties).unwrap_or_default())
    }
}

/// Beyond about this many bytes of cached persons ([`approx_bytes`]) the cache is dropped
/// after a commit. It was 500 000 persons: a 10M-event ingest (400 000 persons of ~30
/// properties each) never dropped it and kept them all.
const CACHE_BYTES: usize = 192 << 20;
/// Beyond this many cached distinct ids (with a person or without) the caches are dropped
/// after a commit too: a site whose visitors are mostly anonymous and personless caches few
/// persons but an entry per visitor.
const MAX_CACHED_IDS: usize = 2_000_000;
/// How many distinct warnings are remembered for deduplication.
const MAX_DISTINCT_WARNINGS: usize = 100_000;

pub struct Persons {
    store: Arc<dyn PersonStore>,
    distinct: HashMap<(TeamId, DistinctId), Option<i64>>,
    /// Distinct ids recorded as personless ([`Op::Personless`]) by this process, so a
    /// personless event writes the record once per id; dropped with the other caches
    /// (an id seen again writes it again, which changes nothing).
    personless: HashSet<(TeamId, DistinctId)>,
    persons: HashMap<i64, Cached>,
    groups: HashMap<(TeamId, u8, String), Option<GroupRow>>,
    /// Merged-away person → the person it went into (cached distinct ids may still name it).
    moved: HashMap<i64, i64>,
    deleted: HashSet<i64>,
    dirty: BTreeSet<i64>,
    dirty_groups: BTreeSet<(TeamId, u8, String)>,
    ops: Vec<Op>,
    next_id: i64,
    /// The last WAL record applied (committed or not).
    applied: u64,
    records_pending: usize,
    /// False: every event is personless (the service's person processing is off).
    enabled: bool,
    warned: HashSet<(TeamId, String, String)>,
    /// [`Cached::bytes`] of every cached person, and the most kept after a commit.
    cached_bytes: usize,
    cache_limit: usize,
    /// Persons whose properties snapshot the current record's stamps share; dropped from
    /// the cache when the record is done (kept for every cached person, the snapshots took
    /// a 10M-event ingest to 7.6 GiB of peak RSS; 6.0 GiB without).
    snapshotted: Vec<i64>,
}

/// Context of one WAL record.
pub struct RecordCtx<'a> {
    pub team: TeamId,
    pub received: DateTime<Utc>,
    pub actor: Option<&'a str>,
    pub event_names: &'a [String],
}

impl Persons {
    pub fn open(store: Arc<dyn PersonStore>) -> Result<Self> {
        let next_id = store.next_person_id()?;
        let applied = store.last_seq();
        Ok(Self {
            store,
            distinct: HashMap::new(),
            personless: HashSet::new(),
            persons: HashMap::new(),
            groups: HashMap::new(),
            moved: HashMap::new(),
            deleted: HashSet::new(),
            dirty: BTreeSet::new(),
            dirty_groups: BTreeSet::new(),
            ops: Vec::new(),
            next_id,
            applied,
            records_pending: 0,
            enabled: true,
            warned: HashSet::new(),
            cached_bytes: 0,
            cache_limit: CACHE_BYTES,
            snapshotted: Vec::new(),
        })
    }

    /// Sets the cache's limit (tests drop it after every commit with 0).
    #[cfg(test)]
    pub(crate) fn set_cache_limit(&mut self, bytes: usize) {
        self.cache_limit = bytes;
    }

    /// Turns person processing off (every event personless, groups still kept) or on.
    pub fn set_enabled(&mut self, on: bool) {
        self.enabled = on;
    }

    pub fn store(&self) -> &Arc<dyn PersonStore> {
        &self.store
    }

    /// The last WAL sequence stored (a replay applies only what follows it).
    pub fn stored_seq(&self) -> u64 {
        self.store.last_seq()
    }

    pub fn records_pending(&self) -> usize {
        self.records_pending
    }

    /// Counts a record whose person processing failed as applied, so the stored sequence
    /// moves past it (its events were kept without person changes).
    pub fn skip(&mut self, seq: u64) {
        if seq > self.applied {
            self.applied = seq;
            self.records_pending += 1;
        }
    }

    fn resolve(&self, mut id: i64) -> i64 {
        while let Some(n) = self.moved.get(&id) {
            id = *n;
        }
        id
    }

    fn lookup(&mut self, team: TeamId, did: &DistinctId) -> Result<Option<i64>> {
        let key = (team, did.clone());
        let found = match self.distinct.get(&key) {
            Some(hit) => *hit,
            None => {
                let got = self.store.person_id_of(team, did)?;
                self.distinct.insert(key, got);
                got
            }
        };
        Ok(found
            .map(|id| self.resolve(id))
            .filter(|id| !self.deleted.contains(id)))
    }

    fn load(&mut self, team: TeamId, id: i64) -> Result<Option<&mut Cached>> {
        if !self.persons.contains_key(&id) {
            match self.store.person(team, id)? {
                Some(row) => {
                    let bytes = approx_bytes(&row.properties);
                    self.cached_bytes += bytes;
                    self.persons.insert(
                        id,
                        Cached {
                            row,
                            snapshot: None,
                            bytes,
                        },
                    );
                }
                None => return Ok(None),
            }
        }
        Ok(self.persons.get_mut(&id))
    }

    /// Drops a person from the cache (merged away or deleted).
    fn uncache(&mut self, id: i64) {
        if let Some(p) = self.persons.remove(&id) {
            self.cached_bytes = self.cached_bytes.saturating_sub(p.bytes);
        }
    }

    /// `did`, which had no person, now has person `id`: the events it sent without one
    /// (personless, stamped with the id derived from `did`) answer as that person from now
    /// on, through a person-id override. Without it a posthog-js site's anonymous activity
    /// (`person_profiles: 'identified_only'`) was cut off from the user at identify.
    ///
    /// Only a distinct id recorded as personless gets one: an override for every id an
    /// identify links (most never sent a personless event) multiplied the overrides by 8
    /// at the bench's 2M events and cost 19 % of ingest.
    fn adopt_personless(&mut self, team: TeamId, did: &DistinctId, id: i64) -> Result<()> {
        let key = (team, did.clone());
        if !self.personless.remove(&key) && !self.store.was_personless(team, did)? {
            return Ok(());
        }
        self.ops.push(Op::Adopted {
            team,
            distinct_id: did.clone(),
        });
        let Some(new) = self.load(team, id)?.map(|p| p.row.uuid) else {
            return Ok(());
        };
        let old = PersonUuid::of(team, did);
        if old != new {
            self.ops.push(Op::Override { team, old, new });
        }
        Ok(())
    }

    /// `did` sent a personless event and has no person: records it (once) so an identify
    /// adopts its events.
    fn note_personless(&mut self, team: TeamId, did: &DistinctId) {
        if self.personless.insert((team, did.clone())) {
            self.ops.push(Op::Personless {
                team,
                distinct_id: did.clone(),
            });
        }
    }

    fn set_distinct(&mut self, team: TeamId, did: &DistinctId, person_id: i64) {
        self.distinct.insert((team, did.clone()), Some(person_id));
        self.ops.push(Op::SetDistinct {
            team,
            distinct_id: did.clone(),
            person_id,
        });
    }

    fn create(
        &mut self,
        team: TeamId,
        did: &DistinctId,
        at: DateTime<Utc>,
        identified: bool,
        actor: &str,
        received: DateTime<Utc>,
    ) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        let uuid = PersonUuid::of(team, did);
        self.persons.insert(
            id,
            Cached {
                row: PersonRow {
                    id,
                    team,
                    uuid,
                    created_at: at,
                    properties: Map::new(),
                    is_identified: identified,
                    version: 0,
                },
                snapshot: None,
                bytes: 0,
            },
        );
        self.dirty.insert(id);
        // A person deleted or merged away may have had this uuid: events under it are this
        // new person's now.
        self.ops.push(Op::ClearOverride { team, old: uuid });
        self.set_distinct(team, did, id);
        self.ops.push(Op::Activity(Activity {
            team,
            person_id: id,
            person_uuid: uuid,
            activity: "created".into(),
            actor: actor.to_owned(),
            detail: json!({}),
            at: received,
        }));
        id
    }

    fn warn(&mut self, team: TeamId, kind: &str, details: Value, at: DateTime<Utc>) {
        // The same warning is recorded once per process run, not once per event (a client
        // that keeps sending a bad group type would otherwise fill the table).
        if self.warned.len() < MAX_DISTINCT_WARNINGS
            && !self
                .warned
                .insert((team, kind.to_owned(), details.to_string()))
        {
            return;
        }
        self.ops.push(Op::Warning {
            team,
            kind: kind.to_owned(),
            details,
            at,
        });
    }

    fn mark_identified(&mut self, team: TeamId, id: i64) -> Result<()> {
        if let Some(p) = self.load(team, id)?
            && !p.row.is_identified
        {
            p.row.is_identified = true;
            p.row.version += 1;
            self.dirty.insert(id);
        }
        Ok(())
    }

    /// The person an event of `did` belongs to, made when there is none.
    fn person_for(
        &mut self,
        team: TeamId,
        did: &DistinctId,
        at: DateTime<Utc>,
        actor: &str,
        received: DateTime<Utc>,
    ) -> Result<i64> {
        match self.lookup(team, did)? {
            Some(id) if self.load(team, id)?.is_some() => Ok(id),
            _ => Ok(self.create(team, did, at, false, actor, received)),
        }
    }

    /// Merges `other`'s person into `target`'s and answers the person the event is
    /// stamped with: the merged one, or where the merge is refused, the person of the
    /// event's own distinct id (`other` when `event_is_other`, as for `$create_alias`).
    #[allow(clippy::too_many_arguments)]
    fn merge(
        &mut self,
        team: TeamId,
        target: &DistinctId,
        other: &DistinctId,
        event_is_other: bool,
        dangerous: bool,
        event: &str,
        at: DateTime<Utc>,
        actor: &str,
        received: DateTime<Utc>,
    ) -> Result<i64> {
        let own = if event_is_other { other } else { target };
        if other == target {
            return self.person_for(team, target, at, actor, received);
        }
        if !is_mergeable_id(target.as_str()) || !is_mergeable_id(other.as_str()) {
            let bad = if is_mergeable_id(target.as_str()) {
                other
            } else {
                target
            };
            self.warn(
                team,
                "cannot_merge_with_illegal_distinct_id",
                json!({"sourcePersonDistinctId": other, "targetPersonDistinctId": target, "illegalDistinctId": bad, "eventName": event}),
                received,
            );
            return self.person_for(team, own, at, actor, received);
        }
        let t = self.lookup(team, target)?;
        let o = self.lookup(team, other)?;
        match (t, o) {
            (None, None) => {
                let id = self.create(team, target, at, true, actor, received);
                self.set_distinct(team, other, id);
                self.adopt_personless(team, other, id)?;
                Ok(id)
            }
            (Some(t), None) => {
                self.set_distinct(team, other, t);
                self.adopt_personless(team, other, t)?;
                self.mark_identified(team, t)?;
                Ok(t)
            }
            (None, Some(o)) => {
                self.set_distinct(team, target, o);
                self.adopt_personless(team, target, o)?;
                self.mark_identified(team, o)?;
                Ok(o)
            }
            (Some(t), Some(o)) if t == o => {
                self.mark_identified(team, t)?;
                Ok(t)
            }
            (Some(t), Some(o)) => {
                let Some(other_row) = self.load(team, o)?.map(|c| c.row.clone()) else {
                    self.set_distinct(team, other, t);
                    return Ok(t);
                };
                if other_row.is_identified && !dangerous {
                    self.warn(
                        team,
                        "cannot_merge_already_identified",
                        json!({"sourcePersonDistinctId": other, "targetPersonDistinctId": target, "eventName": event}),
                        received,
                    );
                    return Ok(if event_is_other { o } else { t });
                }
                let Some(target) = self.load(team, t)? else {
                    return Ok(o);
                };
                let mut props = other_row.properties.clone();
                props.extend(std::mem::take(&mut target.row.properties));
                target.row.properties = props;
                target.row.created_at = target.row.created_at.min(other_row.created_at);
                target.row.is_identified = true;
                target.row.version += 1;
                target.snapshot = None;
                let target_uuid = target.row.uuid;
                self.dirty.insert(t);
                self.dirty.remove(&o);
                self.uncache(o);
                self.moved.insert(o, t);
                self.ops.push(Op::MergePerson {
                    team,
                    from: o,
                    to: t,
                });
                self.ops.push(Op::Override {
                    team,
                    old: other_row.uuid,
                    new: target_uuid,
                });
                self.ops.push(Op::Activity(Activity {
                    team,
                    person_id: t,
                    person_uuid: target_uuid,
                    activity: "merged".into(),
                    actor: actor.to_owned(),
                    detail: json!({"merged_person_id": o, "merged_person_uuid": other_row.uuid, "event": event}),
                    at: received,
                }));
                Ok(t)
            }
        }
    }

    fn group(
        &mut self,
        team: TeamId,
        index: u8,
        key: &str,
        set: &Map<String, Value>,
        at: DateTime<Utc>,
    ) -> Result<()> {
        let k = (team, index, key.to_owned());
        if !self.groups.contains_key(&k) {
            let got = self.store.group(team, index, key)?;
            self.groups.insert(k.clone(), got);
        }
        let slot = self.groups.get_mut(&k).expect("inserted");
        let g = slot.get_or_insert_with(|| GroupRow {
            team,
            index,
            key: key.to_owned(),
            created_at: at,
            updated_at: at,
            properties: Map::new(),
        });
        g.properties
            .extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
        g.created_at = g.created_at.min(at);
        g.updated_at = g.updated_at.max(at);
        self.dirty_groups.insert(k);
        Ok(())
    }

    /// Applies one WAL record's events; returns each event's stamp, in order.
    pub fn process(
        &mut self,
        seq: u64,
        ctx: &RecordCtx<'_>,
        inputs: &[PersonInput],
    ) -> Result<Vec<Stamp>> {
        let stamps = self.process_record(seq, ctx, inputs);
        for id in std::mem::take(&mut self.snapshotted) {
            if let Some(p) = self.persons.get_mut(&id) {
                p.snapshot = None;
            }
        }
        stamps
    }

    fn process_record(
        &mut self,
        seq: u64,
        ctx: &RecordCtx<'_>,
        inputs: &[PersonInput],
    ) -> Result<Vec<Stamp>> {
        if seq <= self.applied {
            // Already applied before a restart: stamp with what is stored, change nothing.
            return inputs
                .iter()
                .map(|i| self.stamp_only(ctx.team, i))
                .collect();
        }
        let team = ctx.team;
        let mut out = Vec::with_capacity(inputs.len());
        for (n, i) in inputs.iter().enumerate() {
            let event = ctx.event_names.get(n).map(String::as_str).unwrap_or("");
            let actor_owned;
            let actor = match ctx.actor {
                Some(a) => a,
                None => {
                    actor_owned = format!("event:{event}");
                    &actor_owned
                }
            };
            for w in &i.warnings {
                self.warn(team, &w.kind, w.details.clone(), ctx.received);
            }
            if let PersonAction::Group {
                index: Some(index),
                key,
                set,
                ..
            } = &i.action
            {
                self.group(team, *index, key, set, i.timestamp)?;
            }
            if !i.process || !self.enabled {
                if let PersonAction::Merge { .. } = i.action
                    && self.enabled
                {
                    self.warn(
                        team,
                        "invalid_event_when_process_person_profile_is_false",
                        json!({"eventName": event, "distinctId": i.distinct_id, "reason": "merges need person processing; $process_person_profile is false"}),
                        ctx.received,
                    );
                }
                // A personless event of a distinct id that has a person (an anonymous id
                // after its identify, say) is that person's, as PostHog stamps it; its
                // properties are not touched.
                let person_id = match self.enabled {
                    true => match self.lookup(team, &i.distinct_id)? {
                        Some(id) => self.load(team, id)?.map(|p| p.row.uuid),
                        None => {
                            self.note_personless(team, &i.distinct_id);
                            None
                        }
                    },
                    false => None,
                };
                out.push(Stamp {
                    person_id: person_id.unwrap_or_else(|| PersonUuid::of(team, &i.distinct_id)),
                    properties: None,
                });
                continue;
            }
            let id = match &i.action {
                PersonAction::Merge {
                    other,
                    dangerous,
                    into_other,
                    event,
                } => {
                    let (target, other) = match into_other {
                        true => (other, &i.distinct_id),
                        false => (&i.distinct_id, other),
                    };
                    self.merge(
                        team,
                        target,
                        other,
                        *into_other,
                        *dangerous,
                        event,
                        i.timestamp,
                        actor,
                        ctx.received,
                    )?
                }
                _ => self.person_for(team, &i.distinct_id, i.timestamp, actor, ctx.received)?,
            };
            let explicit = i.explicit;
            let Some(p) = self.load(team, id)? else {
                out.push(Stamp {
                    person_id: PersonUuid::of(team, &i.distinct_id),
                    properties: None,
                });
                continue;
            };
            let before = explicit.then(|| p.row.properties.clone());
            let changed = apply_property_ops(&mut p.row.properties, &i.set_once, &i.set, &i.unset);
            let mut activity = None;
            if changed {
                p.row.version += 1;
                p.snapshot = None;
                if let Some(before) = before {
                    let after = &p.row.properties;
                    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
                    let changes: Vec<Value> = keys
                        .into_iter()
                        .filter(|k| before.get(*k) != after.get(*k))
                        .map(|k| json!({"key": k, "before": before.get(k), "after": after.get(k)}))
                        .collect();
                    if !changes.is_empty() {
                        activity = Some(Activity {
                            team,
                            person_id: id,
                            person_uuid: p.row.uuid,
                            activity: "updated".into(),
                            actor: actor.to_owned(),
                            detail: json!({"changes": changes}),
                            at: ctx.received,
                        });
                    }
                }
            }
            if changed {
                self.dirty.insert(id);
            }
            if let Some(a) = activity {
                self.ops.push(Op::Activity(a));
            }
            self.snapshotted.push(id);
            let p = self.persons.get_mut(&id).expect("loaded");
            out.push(Stamp {
                person_id: p.row.uuid,
                properties: Some(p.snapshot()),
            });
        }
        self.applied = seq;
        self.records_pending += 1;
        Ok(out)
    }

    fn stamp_only(&mut self, team: TeamId, i: &PersonInput) -> Result<Stamp> {
        if self.enabled
            && let Some(id) = self.lookup(team, &i.distinct_id)?
            && let Some(p) = self.load(team, id)?
        {
            // A personless event gets the person's id as when it was first processed.
            if !i.process {
                return Ok(Stamp {
                    person_id: p.row.uuid,
                    properties: None,
                });
            }
            let stamp = Stamp {
                person_id: p.row.uuid,
                properties: Some(p.snapshot()),
            };
            self.snapshotted.push(id);
            return Ok(stamp);
        }
        Ok(Stamp {
            person_id: PersonUuid::of(team, &i.distinct_id),
            properties: None,
        })
    }

    /// Writes the pending changes with `seq` as the last record they cover.
    pub fn commit(&mut self, seq: u64) -> Result<()> {
        if self.records_pending == 0 && self.ops.is_empty() && self.dirty.is_empty() {
            return Ok(());
        }
        let mut changes = ChangeSet {
            ops: std::mem::take(&mut self.ops),
            ..ChangeSet::default()
        };
        for id in std::mem::take(&mut self.dirty) {
            if let Some(p) = self.persons.get_mut(&id) {
                let properties = p.json();
                let bytes = approx_bytes(&p.row.properties);
                self.cached_bytes = self.cached_bytes.saturating_sub(p.bytes) + bytes;
                p.bytes = bytes;
                let r = &p.row;
                changes.persons.insert(
                    id,
                    PersonWrite {
                        id,
                        team: r.team,
                        uuid: r.uuid,
                        created_at: r.created_at,
                        properties,
                        is_identified: r.is_identified,
                        version: r.version,
                    },
                );
            }
        }
        for k in std::mem::take(&mut self.dirty_groups) {
            if let Some(Some(g)) = self.groups.get(&k) {
                changes.ops.push(Op::Group(g.clone()));
            }
        }
        crate::faults::point("persons.commit");
        let stored = self.store.commit(&changes, seq, self.next_id);
        if stored.is_ok() {
            crate::faults::point("persons.committed");
        }
        if let Err(e) = stored {
            // Keep everything for the next attempt.
            self.dirty.extend(changes.persons.keys().copied());
            let mut ops = Vec::with_capacity(changes.ops.len());
            for op in changes.ops {
                match op {
                    // Groups are written from the cache: mark them dirty again.
                    Op::Group(g) => {
                        self.dirty_groups.insert((g.team, g.index, g.key));
                    }
                    other => ops.push(other),
                }
            }
            self.ops = ops;
            return Err(e);
        }
        self.records_pending = 0;
        if self.cached_bytes > self.cache_limit
            || self.distinct.len() + self.personless.len() > MAX_CACHED_IDS
        {
            self.cached_bytes = 0;
            self.distinct.clear();
            self.personless.clear();
            self.persons.clear();
            self.groups.clear();
            self.moved.clear();
            self.deleted.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::harness::{self, T};
    use super::*;
    use crate::model::Event;
    use crate::persons::store::SqliteStore;
    use uuid::Uuid;

    fn puuid(did: &str) -> PersonUuid {
        PersonUuid::of(T, &did.into())
    }
    use crate::model::PersonCommand;
    use crate::persons::person_input;

    /// The shared harness plus a clock, committing after every event.
    struct Harness {
        h: harness::Harness,
        t: i64,
    }

    impl std::ops::Deref for Harness {
        type Target = harness::Harness;
        fn deref(&self) -> &harness::Harness {
            &self.h
        }
    }

    impl std::ops::DerefMut for Harness {
        fn deref_mut(&mut self) -> &mut harness::Harness {
            &mut self.h
        }
    }

    impl Harness {
        fn new() -> Self {
            Self {
                h: harness::Harness::new(),
                t: 0,
            }
        }

        fn send(&mut self, name: &str, did: &str, props: Value) -> Stamp {
            self.t += 1;
            let ts = DateTime::from_timestamp(1_700_000_000 + self.t, 0).unwrap();
            let props = props.as_object().unwrap().clone();
            let stamp = self.h.event(name, did, ts, props);
            self.h.commit();
            stamp
        }

        fn person(&self, did: &str) -> Option<crate::persons::Person> {
            let s = self.p.store();
            let id = s.person_id_of(T, &did.into()).unwrap()?;
            s.full_person(T, id).unwrap()
        }

        fn props(&self, did: &str) -> Value {
            Value::Object(self.person(did).unwrap().properties)
        }

        fn count(&self) -> u64 {
            self.p.store().list(T, &Default::default(), 1, 0).unwrap().1
        }

        fn warnings(&self) -> Vec<String> {
            self.p
                .store()
                .warnings(T)
                .unwrap()
                .into_iter()
                .map(|w| w.kind)
                .collect()
        }
    }

    #[test]
    fn new_person_from_first_event() {
        let mut h = Harness::new();
        let s = h.send(
            "$pageview",
            "anon-1",
            json!({"$browser": "Chrome", "$set_once": {"first": 1}, "$set": {"plan": "free"}}),
        );
        assert_eq!(s.person_id, puuid("anon-1"));
        let p = h.person("anon-1").unwrap();
        assert_eq!(p.uuid, puuid("anon-1"));
        assert!(!p.is_identified);
        assert_eq!(p.created_at.timestamp(), 1_700_000_001);
        assert_eq!(
            Value::Object(p.properties),
            json!({"$browser": "Chrome", "$initial_browser": "Chrome", "first": 1, "plan": "free"})
        );
        assert_eq!(
            Value::Object((*s.properties.unwrap()).clone()),
            json!({"$browser": "Chrome", "$initial_browser": "Chrome", "first": 1, "plan": "free"})
        );
        // Later events: set overwrites, set_once does not, the snapshot follows.
        let s2 = h.send(
            "$pageview",
            "anon-1",
            json!({"$browser": "Firefox", "$set_once": {"first": 2}}),
        );
        assert_eq!(h.props("anon-1")["$browser"], "Firefox");
        assert_eq!(h.props("anon-1")["$initial_browser"], "Chrome");
        assert_eq!(h.props("anon-1")["first"], 1);
        assert_eq!(s2.properties.unwrap()["$browser"], "Firefox");
        h.send(
            "$delete_person_property",
            "anon-1",
            json!({"$unset": ["plan"]}),
        );
        assert!(h.props("anon-1").get("plan").is_none());
    }

    #[test]
    fn identify_outcomes() {
        // Neither id has a person: one identified person with both.
        let mut h = Harness::new();
        h.send(
            "$identify",
            "user-1",
            json!({"$anon_distinct_id": "anon-1", "$set": {"email": "a@x.io"}}),
        );
        let p = h.person("user-1").unwrap();
        assert!(p.is_identified);
        assert_eq!(p.uuid, puuid("user-1"));
        assert_eq!(p.distinct_ids, vec!["anon-1", "user-1"]);
        assert_eq!(h.count(), 1);

        // Only the anonymous id has one: the user id joins it.
        let mut h = Harness::new();
        h.send("$pageview", "anon-2", json!({}));
        h.send(
            "$identify",
            "user-2",
            json!({"$anon_distinct_id": "anon-2"}),
        );
        let p = h.person("user-2").unwrap();
        assert_eq!(p.uuid, puuid("anon-2"));
        assert!(p.is_identified);
        assert_eq!(h.count(), 1);

        // Only the target has one: the other id joins it.
        let mut h = Harness::new();
        h.send("x", "user-3", json!({}));
        h.send(
            "$identify",
            "user-3",
            json!({"$anon_distinct_id": "anon-3"}),
        );
        assert_eq!(h.person("anon-3").unwrap().uuid, puuid("user-3"));

        // A plain $identify neither merges nor marks identified.
        let mut h = Harness::new();
        h.send("$identify", "user-4", json!({"$set": {"a": 1}}));
        assert!(!h.person("user-4").unwrap().is_identified);
    }

    #[test]
    fn merge_of_two_persons() {
        let mut h = Harness::new();
        h.send(
            "$pageview",
            "anon",
            json!({"$set": {"color": "red", "only_anon": 1}}),
        );
        h.send("$pageview", "user", json!({"$set": {"color": "blue"}}));
        let anon_uuid = puuid("anon");
        let s = h.send("$identify", "user", json!({"$anon_distinct_id": "anon"}));
        assert_eq!(h.count(), 1);
        let p = h.person("anon").unwrap();
        assert_eq!(p.uuid, puuid("user"), "the target survives");
        assert_eq!(s.person_id, p.uuid);
        assert!(p.is_identified);
        assert_eq!(p.properties["color"], "blue", "the target's properties win");
        assert_eq!(p.properties["only_anon"], 1);
        assert_eq!(
            p.created_at.timestamp(),
            1_700_000_001,
            "earliest created_at"
        );
        assert_eq!(
            h.p.store()
                .overrides(T)
                .unwrap()
                .get(&anon_uuid.to_string()),
            Some(&p.uuid.to_string())
        );
        // The merged person's later events go to the target.
        assert_eq!(h.send("x", "anon", json!({})).person_id, p.uuid);
        // Chains: the merged person merges again.
        h.send("x", "other", json!({}));
        // `user` aliased to `other`: `user`'s person goes into `other`'s, but it is
        // identified now: refused.
        h.send("$create_alias", "user", json!({"alias": "other"}));
        assert_eq!(h.warnings(), vec!["cannot_merge_already_identified"]);
        assert_eq!(h.count(), 2);
        h.send("$merge_dangerously", "other", json!({"alias": "user"}));
        assert_eq!(h.count(), 1);
        let o = h.p.store().overrides(T).unwrap();
        assert_eq!(
            o[&anon_uuid.to_string()],
            puuid("other").to_string(),
            "chains are followed"
        );
        assert_eq!(o[&puuid("user").to_string()], puuid("other").to_string());
        assert_eq!(h.person("anon").unwrap().distinct_ids.len(), 3);
    }

    /// posthog-js's default (`person_profiles: 'identified_only'`): the anonymous id's
    /// events come personless, then the user identifies. Whichever of the two ids had a
    /// person, and through `$identify`, `$create_alias` and `$merge_dangerously`, the
    /// personless events answer as the person afterwards (an override of the id they were
    /// stamped with), and so does a personless event of either id sent after the merge.
    #[test]
    fn personless_activity_joins_the_person_it_merges_into() {
        let personless = || json!({"$process_person_profile": false});
        // Each merges `anon` into `user`: an alias is sent by the id that joins the alias.
        let merge = |kind: &str| match kind {
            "$identify" => ("user", json!({"$anon_distinct_id": "anon"})),
            "$create_alias" => ("anon", json!({"alias": "user"})),
            _ => ("user", json!({"alias": "anon"})),
        };
        for kind in ["$identify", "$create_alias", "$merge_dangerously"] {
            // Which ids have a person before the merge: neither, the target, the other.
            for person_of in [None, Some("user"), Some("anon")] {
                let mut h = Harness::new();
                if let Some(did) = person_of {
                    h.send("$pageview", did, json!({}));
                }
                for did in ["anon", "user"] {
                    if Some(did) != person_of {
                        let s = h.send("$pageview", did, personless());
                        assert_eq!(s.person_id, puuid(did));
                    }
                }
                let (did, props) = merge(kind);
                let s = h.send(kind, did, props);
                let person = s.person_id;
                assert_eq!(
                    person,
                    puuid(person_of.unwrap_or("user")),
                    "{kind} {person_of:?}"
                );
                let overrides = h.p.store().overrides(T).unwrap();
                for did in ["anon", "user"] {
                    let stamped = puuid(did).to_string();
                    let reads_as = overrides.get(&stamped).cloned().unwrap_or(stamped);
                    assert_eq!(reads_as, person.to_string(), "{kind} {person_of:?}: {did}");
                    let s = h.send("$pageview", did, personless());
                    assert_eq!(s.person_id, person, "{kind} {person_of:?}: {did} after");
                    assert_eq!(s.properties, None);
                }
                assert_eq!(h.count(), 1);
            }
        }
    }

    /// Only a distinct id that sent personless events while it had none gets an override
    /// when it joins a person, also when the processor restarted in between; one that was
    /// processed all along (every identify of a site without `identified_only`) gets none.
    #[test]
    fn only_personless_ids_are_adopted() {
        let personless = || json!({"$process_person_profile": false});
        let mut h = Harness::new();
        h.send("$pageview", "a1", json!({}));
        h.send("$identify", "u1", json!({"$anon_distinct_id": "a1"}));
        h.send("$identify", "u2", json!({"$anon_distinct_id": "a2"}));
        assert!(h.p.store().overrides(T).unwrap().is_empty());

        h.send("$pageview", "a3", personless());
        h.send("$pageview", "a3", personless());
        let s = h.p.store();
        assert!(s.was_personless(T, &"a3".into()).unwrap());
        h.h.reopen();
        let u3 = h.send("$identify", "u3", json!({"$anon_distinct_id": "a3"}));
        let overrides = h.p.store().overrides(T).unwrap();
        assert_eq!(overrides.len(), 1, "{overrides:?}");
        assert_eq!(
            overrides[&puuid("a3").to_string()],
            u3.person_id.to_string()
        );
        assert!(!h.p.store().was_personless(T, &"a3".into()).unwrap());
    }

    #[test]
    fn forbidden_ids_and_personless_events() {
        let mut h = Harness::new();
        h.send("x", "real", json!({}));
        h.send(
            "$identify",
            "real",
            json!({"$anon_distinct_id": "undefined"}),
        );
        h.send("$create_alias", "Anonymous", json!({"alias": "real"}));
        assert_eq!(h.warnings().len(), 2);
        assert!(
            h.warnings()
                .iter()
                .all(|w| w == "cannot_merge_with_illegal_distinct_id")
        );
        assert!(h.person("undefined").is_none());
        assert_eq!(h.person("real").unwrap().distinct_ids, vec!["real"]);
        let s = h.send(
            "x",
            "ghost",
            json!({"$process_person_profile": false, "$set": {"a": 1}}),
        );
        assert_eq!(
            s,
            Stamp {
                person_id: puuid("ghost"),
                properties: None
            }
        );
        assert!(h.person("ghost").is_none());
        h.send(
            "$identify",
            "ghost",
            json!({"$process_person_profile": false, "$anon_distinct_id": "real"}),
        );
        assert!(h.person("ghost").is_none());
        assert!(
            h.warnings()
                .contains(&"invalid_event_when_process_person_profile_is_false".to_string())
        );
    }

    #[test]
    fn groups_merge_shallowly() {
        let mut h = Harness::new();
        h.send("$groupidentify", "u", json!({"$group_type": "company", "$group_key": "acme", "$group_set": {"plan": "free", "size": {"n": 1}}}));
        h.send("$groupidentify", "u", json!({"$group_type": "company", "$group_key": "acme", "$group_set": {"size": {"m": 2}}}));
        h.send(
            "$groupidentify",
            "u",
            json!({"$group_type": "sixth", "$group_key": "k"}),
        );
        h.send(
            "$groupidentify",
            "v",
            json!({"$group_type": "sixth", "$group_key": "k"}),
        );
        let g = h.p.store().group(T, 0, "acme").unwrap().unwrap();
        assert_eq!(
            Value::Object(g.properties),
            json!({"plan": "free", "size": {"m": 2}})
        );
        assert_eq!(h.p.store().group_rows(T).unwrap().len(), 1);
        assert_eq!(h.warnings(), vec!["group_type_limit_exceeded"]);
    }

    #[test]
    fn commands_delete_split_and_queue() {
        let mut h = Harness::new();
        h.send(
            "$identify",
            "user",
            json!({"$anon_distinct_id": "anon", "$set": {"email": "u@x.io"}}),
        );
        let id = h.person("user").unwrap().id;
        h.cmd(PersonCommand::Split { id });
        assert_eq!(h.count(), 2);
        assert_eq!(
            h.person("user").unwrap().id,
            id,
            "the id the person was made from keeps it"
        );
        assert_ne!(h.person("anon").unwrap().id, id);
        assert_eq!(h.person("anon").unwrap().uuid, puuid("anon"));
        h.cmd(PersonCommand::DeleteEvents { id });
        h.cmd(PersonCommand::Delete {
            ids: vec![id],
            distinct_ids: vec![],
            delete_events: true,
        });
        assert!(h.person("user").is_none());
        let tasks = h.p.store().tasks(T).unwrap();
        assert_eq!(tasks.len(), 2);
        assert!(
            tasks[1]
                .event_person_ids
                .contains(&puuid("user").to_string())
        );
        let (acts, _) = h.p.store().activity(T, Some(id), 100, 0).unwrap();
        assert_eq!(
            acts.iter().map(|a| a.activity.as_str()).collect::<Vec<_>>(),
            vec!["deleted", "events_deletion_queued"],
            "only the values-free entries survive"
        );
        // A new event of the deleted id makes a new person.
        h.send("x", "user", json!({}));
        assert_ne!(h.person("user").unwrap().id, id);
        h.cmd(PersonCommand::Delete {
            ids: vec![],
            distinct_ids: vec!["anon".into()],
            delete_events: false,
        });
        assert!(h.person("anon").is_none());
    }

    #[test]
    fn replay_applies_nothing_twice() {
        let mut h = Harness::new();
        h.send("x", "a", json!({"$set": {"n": 1}}));
        // A record is applied but not committed when the process dies.
        h.seq += 1;
        let e = Event {
            uuid: Uuid::nil(),
            event: "$identify".into(),
            distinct_id: "b".into(),
            timestamp: DateTime::UNIX_EPOCH,
            created_at: DateTime::UNIX_EPOCH,
            properties: json!({"$anon_distinct_id": "a"})
                .as_object()
                .unwrap()
                .clone(),
        };
        let names = ["$identify".to_string()];
        let ctx = RecordCtx {
            team: T,
            received: DateTime::UNIX_EPOCH,
            actor: None,
            event_names: &names,
        };
        let input = person_input(&e, |_| None);
        let seq = h.seq;
        h.p.process(seq, &ctx, std::slice::from_ref(&input))
            .unwrap();
        // Restart: the store covers seq 1 only; the record is replayed and applied once.
        let store = Arc::new(SqliteStore::open(&h.path).unwrap());
        let mut p = Persons::open(store).unwrap();
        assert_eq!(p.stored_seq(), 1);
        p.process(1, &ctx, std::slice::from_ref(&input)).unwrap();
        p.process(2, &ctx, std::slice::from_ref(&input)).unwrap();
        p.commit(2).unwrap();
        let s = p.store();
        let id = s.person_id_of(T, &"b".into()).unwrap().unwrap();
        assert_eq!(
            s.full_person(T, id).unwrap().unwrap().distinct_ids,
            vec!["a", "b"]
        );
        assert_eq!(s.list(T, &Default::default(), 10, 0).unwrap().1, 1);
        // Replaying it a third time changes nothing and stamps from the store.
        let mut p = Persons::open(Arc::new(SqliteStore::open(&h.path).unwrap())).unwrap();
        let st = p.process(2, &ctx, &[input]).unwrap();
        assert_eq!(st[0].person_id, puuid("a"));
    }
}
