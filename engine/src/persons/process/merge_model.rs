//! Property test: person merges give the same persons as a simple reference model.
//!
//! Random sequences of operations over a few distinct ids (`$identify` with
//! `$anon_distinct_id`, `$create_alias`, `$merge_dangerously`, plain and personless events
//! carrying `$set` / `$set_once` / `$unset`, and the API's delete and split) go through the
//! real path: `person_input` as capture reads the event, then [`Persons`] on a SQLite store
//! in a temporary directory, committed at random points and sometimes reopened, as after a
//! restart. The same operations go through [`Model`], a plain map from distinct id to person
//! written from `spec/compat.md` (Persons), not from the processor: who survives a merge,
//! whose properties win, when a merge is refused. The final persons must be equal: their
//! distinct ids, properties, uuid (which person survived), `is_identified` and `created_at`.

use std::collections::{BTreeSet, HashMap};

use chrono::DateTime;
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::harness::{Harness, T};
use crate::model::PersonCommand;
use crate::model::person_uuid;

/// The distinct ids the operations use; `anonymous` is one PostHog never merges on.
const IDS: &[&str] = &["a", "b", "c", "d", "anonymous"];
const KEYS: &[&str] = &["k1", "k2", "k3"];
const START: i64 = 1_700_000_000;

/// What an event asks of persons besides its property operations.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// `$pageview`.
    Plain,
    /// `$identify` without `$anon_distinct_id`: no merge, not identified.
    PlainIdentify,
    /// `$process_person_profile: false`: no person is made or changed.
    Personless,
    /// `$identify` with `$anon_distinct_id` = the id.
    Identify(usize),
    /// `$create_alias` with `alias` = the id.
    Alias(usize),
    /// `$merge_dangerously` with `alias` = the id.
    Dangerous(usize),
}

type Props = Vec<(usize, Option<u8>)>;

#[derive(Debug, Clone)]
enum Op {
    Event {
        did: usize,
        kind: Kind,
        set: Props,
        set_once: Props,
        unset: Vec<usize>,
    },
    /// Delete the person of this distinct id: by the id (bulk_delete's `distinct_ids`) or
    /// by its person id (DELETE).
    Delete {
        did: usize,
        by_person_id: bool,
    },
    Split(usize),
    /// Store what is pending (the pipeline commits when idle or after many records).
    Commit,
    /// Commit, then start over from the store with an empty cache.
    Reopen,
}

/// A property value: `None` is JSON null (which counts as present for `$set_once`).
fn value(v: Option<u8>) -> Value {
    v.map_or(Value::Null, Value::from)
}

fn prop_map(props: &Props) -> Map<String, Value> {
    props
        .iter()
        .map(|&(k, v)| (KEYS[k].to_owned(), value(v)))
        .collect()
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let id = || 0..IDS.len();
    let props = || prop::collection::vec((0..KEYS.len(), prop::option::of(0u8..3)), 0..3);
    let kind = prop_oneof![
        3 => Just(Kind::Plain),
        1 => Just(Kind::PlainIdentify),
        1 => Just(Kind::Personless),
        4 => id().prop_map(Kind::Identify),
        3 => id().prop_map(Kind::Alias),
        2 => id().prop_map(Kind::Dangerous),
    ];
    let event = (
        id(),
        kind,
        props(),
        props(),
        prop::collection::vec(0..KEYS.len(), 0..2),
    )
        .prop_map(|(did, kind, set, set_once, unset)| Op::Event {
            did,
            kind,
            set,
            set_once,
            unset,
        });
    let op = prop_oneof![
        12 => event,
        1 => (id(), any::<bool>()).prop_map(|(did, by_person_id)| Op::Delete { did, by_person_id }),
        1 => id().prop_map(Op::Split),
        2 => Just(Op::Commit),
        1 => Just(Op::Reopen),
    ];
    prop::collection::vec(op, 1..40)
}

/// A person as the comparison sees it.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    dids: BTreeSet<String>,
    uuid: Uuid,
    identified: bool,
    created: i64,
    props: Map<String, Value>,
}

fn sorted(mut v: Vec<Seen>) -> Vec<Seen> {
    v.sort_by(|a, b| a.dids.cmp(&b.dids));
    v
}

// ---------------------------------------------------------------------------------------
// The reference model.

#[derive(Debug, Clone)]
struct ModelPerson {
    dids: BTreeSet<String>,
    props: Map<String, Value>,
    identified: bool,
    /// The distinct id the person was made for: its uuid is derived from it.
    origin: String,
    created: i64,
}

#[derive(Debug, Default)]
struct Model {
    next: usize,
    owner: HashMap<String, usize>,
    persons: HashMap<usize, ModelPerson>,
}

impl Model {
    fn mergeable(did: &str) -> bool {
        did != "anonymous"
    }

    fn create(&mut self, did: &str, identified: bool, at: i64) -> usize {
        let n = self.next;
        self.next += 1;
        self.persons.insert(
            n,
            ModelPerson {
                dids: BTreeSet::from([did.to_owned()]),
                props: Map::new(),
                identified,
                origin: did.to_owned(),
                created: at,
            },
        );
        self.owner.insert(did.to_owned(), n);
        n
    }

    fn person_for(&mut self, did: &str, at: i64) -> usize {
        match self.owner.get(did) {
            Some(&n) => n,
            None => self.create(did, false, at),
        }
    }

    fn join(&mut self, did: &str, n: usize) -> usize {
        self.owner.insert(did.to_owned(), n);
        let p = self.persons.get_mut(&n).expect("owned");
        p.dids.insert(did.to_owned());
        p.identified = true;
        n
    }

    /// `other` joins `target`'s person: the event's distinct id is the target, or for an
    /// alias the alias is.
    fn merge(
        &mut self,
        target: &str,
        other: &str,
        event_is_other: bool,
        dangerous: bool,
        at: i64,
    ) -> usize {
        // The event's own id: its person takes the event when the merge is refused.
        let own = if event_is_other { other } else { target };
        if target == other || !Self::mergeable(target) || !Self::mergeable(other) {
            return self.person_for(own, at);
        }
        match (
            self.owner.get(target).copied(),
            self.owner.get(other).copied(),
        ) {
            (None, None) => {
                let n = self.create(target, true, at);
                self.join(other, n)
            }
            (Some(t), None) => self.join(other, t),
            (None, Some(o)) => self.join(target, o),
            (Some(t), Some(o)) if t == o => {
                self.persons.get_mut(&t).expect("owned").identified = true;
                t
            }
            (Some(t), Some(o)) => {
                if self.persons[&o].identified && !dangerous {
                    // Refused: the other person is somebody already.
                    return if event_is_other { o } else { t };
                }
                let gone = self.persons.remove(&o).expect("owned");
                for d in &gone.dids {
                    self.owner.insert(d.clone(), t);
                }
                let p = self.persons.get_mut(&t).expect("owned");
                p.dids.extend(gone.dids);
                // The target's properties win.
                let mut props = gone.props;
                props.extend(std::mem::take(&mut p.props));
                p.props = props;
                p.created = p.created.min(gone.created);
                p.identified = true;
                t
            }
        }
    }

    fn event(&mut self, did: &str, kind: Kind, ops: (&Props, &Props, &[usize]), at: i64) {
        let n = match kind {
            Kind::Personless => return,
            Kind::Plain | Kind::PlainIdentify => self.person_for(did, at),
            Kind::Identify(o) => self.merge(did, IDS[o], false, false, at),
            // spec §6: the event's distinct id is merged into the alias, the main id.
            Kind::Alias(o) => self.merge(IDS[o], did, true, false, at),
            Kind::Dangerous(o) => self.merge(did, IDS[o], false, true, at),
        };
        let (set, set_once, unset) = ops;
        let props = &mut self.persons.get_mut(&n).expect("made").props;
        for (k, v) in prop_map(set_once) {
            props.entry(k).or_insert(v);
        }
        props.extend(prop_map(set));
        for &k in unset {
            props.remove(KEYS[k]);
        }
    }

    fn delete(&mut self, did: &str) {
        if let Some(n) = self.owner.get(did).copied() {
            for d in self.persons.remove(&n).expect("owned").dids {
                self.owner.remove(&d);
            }
        }
    }

    /// Each distinct id gets its own person; the one the person was made for keeps it.
    fn split(&mut self, did: &str) {
        let Some(n) = self.owner.get(did).copied() else {
            return;
        };
        let p = self.persons.get_mut(&n).expect("owned");
        let keep = p.origin.clone();
        let created = p.created;
        let others: Vec<String> = p.dids.iter().filter(|d| **d != keep).cloned().collect();
        p.dids = BTreeSet::from([keep]);
        for d in others {
            self.create(&d, false, created);
        }
    }

    fn seen(&self) -> Vec<Seen> {
        sorted(
            self.persons
                .values()
                .map(|p| Seen {
                    dids: p.dids.clone(),
                    uuid: person_uuid(T, &p.origin),
                    identified: p.identified,
                    created: p.created,
                    props: p.props.clone(),
                })
                .collect(),
        )
    }
}

// ---------------------------------------------------------------------------------------
// The real thing.

struct Real {
    h: Harness,
}

impl Real {
    fn new() -> Self {
        Self { h: Harness::new() }
    }

    fn event(&mut self, did: &str, kind: Kind, ops: (&Props, &Props, &[usize]), at: i64) {
        let (set, set_once, unset) = ops;
        let mut props = Map::new();
        let name = match kind {
            Kind::Plain => "$pageview",
            Kind::PlainIdentify => "$identify",
            Kind::Personless => {
                props.insert("$process_person_profile".into(), json!(false));
                "$pageview"
            }
            Kind::Identify(o) => {
                props.insert("$anon_distinct_id".into(), json!(IDS[o]));
                "$identify"
            }
            Kind::Alias(o) => {
                props.insert("alias".into(), json!(IDS[o]));
                "$create_alias"
            }
            Kind::Dangerous(o) => {
                props.insert("alias".into(), json!(IDS[o]));
                "$merge_dangerously"
            }
        };
        props.insert("$set".into(), Value::Object(prop_map(set)));
        props.insert("$set_once".into(), Value::Object(prop_map(set_once)));
        props.insert(
            "$unset".into(),
            unset.iter().map(|&k| KEYS[k]).collect::<Vec<_>>().into(),
        );
        let ts = DateTime::from_timestamp(at, 0).unwrap();
        self.h.event(name, did, ts, props);
    }

    fn command(&mut self, command: PersonCommand) {
        self.h.cmd(command);
    }

    fn commit(&mut self) {
        self.h.commit();
    }

    /// The person id of `did` as the API finds it: from the store, once it has settled.
    fn person_id(&mut self, did: &str) -> Option<i64> {
        self.commit();
        self.h.p.store().person_id_of(T, &did.into()).unwrap()
    }

    fn reopen(&mut self) {
        self.h.reopen();
    }

    fn seen(&mut self) -> Vec<Seen> {
        self.commit();
        let store = self.h.p.store();
        let (all, _) = store.list(T, &Default::default(), 10_000, 0).unwrap();
        sorted(
            all.into_iter()
                .map(|p| Seen {
                    dids: p
                        .distinct_ids
                        .into_iter()
                        .map(|d| d.into_string())
                        .collect(),
                    uuid: *p.uuid.as_uuid(),
                    identified: p.is_identified,
                    created: p.created_at.timestamp(),
                    props: p.properties,
                })
                .collect(),
        )
    }
}

/// Runs `ops` through the real processor (with its cache dropped after every commit when
/// `drop_cache`, as a full cache is) and through the model.
fn run(ops: &[Op], drop_cache: bool) -> (Vec<Seen>, Vec<Seen>) {
    let mut real = Real::new();
    if drop_cache {
        real.h.p.set_cache_limit(0);
    }
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        let at = START + step as i64;
        match op {
            Op::Event {
                did,
                kind,
                set,
                set_once,
                unset,
            } => {
                let ops = (set, set_once, unset.as_slice());
                real.event(IDS[*did], *kind, ops, at);
                model.event(IDS[*did], *kind, ops, at);
            }
            Op::Delete { did, by_person_id } => {
                let did = IDS[*did];
                let command = if *by_person_id {
                    match real.person_id(did) {
                        Some(id) => PersonCommand::Delete {
                            ids: vec![id],
                            distinct_ids: Vec::new(),
                            delete_events: false,
                        },
                        None => continue,
                    }
                } else {
                    PersonCommand::Delete {
                        ids: Vec::new(),
                        distinct_ids: vec![did.into()],
                        delete_events: false,
                    }
                };
                real.command(command);
                model.delete(did);
            }
            Op::Split(did) => {
                let did = IDS[*did];
                if let Some(id) = real.person_id(did) {
                    real.command(PersonCommand::Split { id });
                }
                model.split(did);
            }
            Op::Commit => real.commit(),
            Op::Reopen => real.reopen(),
        }
    }
    (real.seen(), model.seen())
}

proptest! {
    #![proptest_config(Config {
        cases: 96,
        // A failure prints its shrunk sequence; nothing is written beside the sources.
        failure_persistence: None,
        ..Config::default()
    })]

    #[test]
    fn merges_match_the_reference_model(ops in ops()) {
        let (real, model) = run(&ops, false);
        prop_assert_eq!(real, model);
        let (real, model) = run(&ops, true);
        prop_assert_eq!(real, model);
    }
}

/// The model itself, on the cases `spec/compat.md` spells out.
#[test]
fn the_model_follows_the_spec() {
    let none: (&Props, &Props, &[usize]) = (&vec![], &vec![], &[]);
    let mut m = Model::default();
    m.event("a", Kind::Plain, (&vec![(0, Some(1))], &vec![], &[]), 1);
    m.event(
        "b",
        Kind::Plain,
        (&vec![(0, Some(2)), (1, Some(2))], &vec![], &[]),
        2,
    );
    // b identifies as a's anonymous id: both have persons, b's survives and wins.
    m.event("b", Kind::Identify(0), none, 3);
    let seen = m.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].uuid, person_uuid(T, "b"));
    assert_eq!(
        Value::Object(seen[0].props.clone()),
        json!({"k1": 2, "k2": 2})
    );
    assert_eq!(seen[0].created, 1);
    // b aliased to c: b's identified person cannot go into c's, unless dangerously.
    m.event("c", Kind::Plain, none, 4);
    m.event("b", Kind::Alias(2), none, 5);
    assert_eq!(m.seen().len(), 2);
    m.event("c", Kind::Dangerous(1), none, 6);
    assert_eq!(m.seen().len(), 1);
    // Never on a forbidden id.
    m.event("d", Kind::Identify(4), none, 7);
    assert_eq!(m.seen().len(), 2);
    // d aliased to c: d's person goes into c's, which keeps its uuid.
    m.event("d", Kind::Alias(2), none, 8);
    let seen = m.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].uuid, person_uuid(T, "c"));
}
