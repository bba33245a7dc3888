//! The person processor on a temporary SQLite file, fed one WAL record at a time, for the
//! processor's tests and the merge property test.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::{Persons, RecordCtx, Stamp};
use crate::model::{CommandRecord, Event, PersonCommand, TeamId};
use crate::persons::person_input;
use crate::persons::store::SqliteStore;

/// The project every record goes to.
pub(super) const T: TeamId = TeamId(1);

pub(super) struct Harness {
    _dir: tempfile::TempDir,
    pub(super) path: std::path::PathBuf,
    pub(super) p: Persons,
    /// The last WAL sequence applied.
    pub(super) seq: u64,
}

impl Harness {
    pub(super) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("meta.sqlite");
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        Self {
            _dir: dir,
            path,
            p: Persons::open(store).unwrap(),
            seq: 0,
        }
    }

    /// Applies `e` as the next record (group types `company` = 0, `project` = 1), without
    /// committing.
    pub(super) fn process(&mut self, e: &Event) -> Stamp {
        let input = person_input(e, |ty| match ty {
            "company" => Some(0),
            "project" => Some(1),
            _ => None,
        });
        self.seq += 1;
        let names = [e.event.clone()];
        let ctx = RecordCtx {
            team: T,
            received: e.timestamp,
            actor: None,
            event_names: &names,
        };
        let stamps = self.p.process(self.seq, &ctx, &[input]).unwrap();
        stamps.into_iter().next().unwrap()
    }

    /// Applies an event `name` of `did` at `at` as the next record, without committing.
    pub(super) fn event(
        &mut self,
        name: &str,
        did: &str,
        at: DateTime<Utc>,
        properties: Map<String, Value>,
    ) -> Stamp {
        self.process(&Event {
            uuid: Uuid::nil(),
            event: name.into(),
            distinct_id: did.into(),
            timestamp: at,
            created_at: at,
            properties,
        })
    }

    /// Applies an API command as the next record, without committing.
    pub(super) fn cmd(&mut self, command: PersonCommand) {
        self.seq += 1;
        let rec = CommandRecord {
            command,
            actor: "api:test".into(),
            at: DateTime::UNIX_EPOCH,
        };
        self.p.command(self.seq, T, &rec).unwrap();
    }

    pub(super) fn commit(&mut self) {
        self.p.commit(self.seq).unwrap();
    }

    /// Commits, then opens the store again as a restarted process would.
    pub(super) fn reopen(&mut self) {
        self.commit();
        let store = Arc::new(SqliteStore::open(&self.path).unwrap());
        self.p = Persons::open(store).unwrap();
    }
}
