use super::*;
use std::io::Read;

fn cfg(events: u64, seed: u64) -> GenConfig {
    GenConfig {
        events,
        seed,
        start: NaiveDate::from_ymd_opt(2024, 1, 1).unwrap(),
        days: 90,
        api_key: "phc_test".into(),
        batch_size: 500,
    }
}

fn rendered(c: &GenConfig) -> (World, Vec<Row>) {
    let w = simulate(c);
    let rows = w.events.iter().map(|e| w.render(c, e).row).collect();
    (w, rows)
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    generate(&cfg(3000, 7), a.path()).unwrap();
    generate(&cfg(3000, 7), b.path()).unwrap();
    generate(&cfg(3000, 8), d.path()).unwrap();
    for f in [
        "batches.jsonl.gz",
        "batches.idx",
        "events.parquet",
        "manifest.json",
    ] {
        let x = std::fs::read(a.path().join(f)).unwrap();
        assert!(!x.is_empty(), "{f}");
        assert_eq!(x, std::fs::read(b.path().join(f)).unwrap(), "{f}");
    }
    assert_ne!(
        std::fs::read(a.path().join("batches.jsonl.gz")).unwrap(),
        std::fs::read(d.path().join("batches.jsonl.gz")).unwrap()
    );
}

#[test]
fn batches_are_gzip_members_with_exactly_the_events() {
    let dir = tempfile::tempdir().unwrap();
    let s = generate(&cfg(1234, 3), dir.path()).unwrap();
    assert_eq!(s.events, 1234);
    let gz = std::fs::read(dir.path().join("batches.jsonl.gz")).unwrap();
    let idx = std::fs::read_to_string(dir.path().join("batches.idx")).unwrap();
    let (mut total, mut last_ts) = (0usize, String::new());
    for line in idx.lines() {
        let f: Vec<usize> = line.split('\t').map(|x| x.parse().unwrap()).collect();
        let mut body = String::new();
        flate2::read::GzDecoder::new(&gz[f[0]..f[0] + f[1]])
            .read_to_string(&mut body)
            .unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["api_key"], "phc_test");
        assert_eq!(v["historical_migration"], true);
        let batch = v["batch"].as_array().unwrap();
        assert_eq!(batch.len(), f[2]);
        assert!(batch.len() <= 500);
        for e in batch {
            let ts = e["timestamp"].as_str().unwrap().to_owned();
            assert!(ts >= last_ts, "time order");
            last_ts = ts;
            assert!(e["properties"]["distinct_id"].is_string());
            assert!(Uuid::parse_str(e["uuid"].as_str().unwrap()).is_ok());
        }
        total += batch.len();
    }
    assert_eq!(total, 1234);
    // The whole file is one gzip stream of JSON lines.
    let mut all = String::new();
    flate2::read::MultiGzDecoder::new(&gz[..])
        .read_to_string(&mut all)
        .unwrap();
    assert_eq!(all.lines().count(), idx.lines().count());
    assert!(last_ts.as_str() < "2024-03-31", "{last_ts}");
}

#[test]
fn sessions_split_at_thirty_minutes_of_inactivity() {
    let c = cfg(20_000, 11);
    let w = simulate(&c);
    assert_eq!(w.events.len(), 20_000);
    let mut by_person: Vec<&Ev> = w.events.iter().collect();
    by_person.sort_by_key(|e| (e.person, e.ts_ms));
    let (mut splits, mut inside) = (0, 0);
    for pair in by_person.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        assert_eq!(w.sessions[a.session as usize].person, a.person);
        assert_eq!(w.sessions[a.session as usize].device, a.device);
        if a.person != b.person {
            continue;
        }
        let gap = b.ts_ms - a.ts_ms;
        assert!(gap > 0, "a person's events never share a millisecond");
        if a.session == b.session {
            assert!(gap < SESSION_GAP_MS, "gap {gap} inside a session");
            inside += 1;
        } else {
            assert!(gap >= SESSION_GAP_MS, "gap {gap} between sessions");
            assert!(b.session > a.session);
            assert_eq!(b.ts_ms, w.sessions[b.session as usize].start_ms);
            splits += 1;
        }
    }
    assert!(splits > 1000 && inside > 10_000, "{splits} {inside}");
    // Every session starts with its landing pageview.
    for s in &w.sessions {
        let first = w
            .events
            .iter()
            .find(|e| w.sessions[e.session as usize].start_ms == s.start_ms)
            .unwrap();
        assert_eq!(first.kind, Kind::Pageview);
    }
}

#[test]
fn shares_are_roughly_realistic() {
    let c = cfg(100_000, 5);
    let (w, rows) = rendered(&c);
    let n_persons = w.persons.len() as f64;
    let share = |f: &dyn Fn(&Device) -> bool| {
        w.persons.iter().filter(|p| f(&p.devices[0])).count() as f64 / n_persons
    };
    let chrome = share(&|d| BROWSER_NAMES[d.browser as usize] == "Chrome");
    let safari = share(&|d| BROWSER_NAMES[d.browser as usize].contains("Safari"));
    let desktop = share(&|d| d.device_type == 0);
    let mobile = share(&|d| d.device_type == 1);
    assert!((0.45..0.62).contains(&chrome), "chrome {chrome}");
    assert!((0.15..0.35).contains(&safari), "safari {safari}");
    assert!((0.54..0.66).contains(&desktop), "desktop {desktop}");
    assert!((0.30..0.42).contains(&mobile), "mobile {mobile}");

    let count = |name: &str| rows.iter().filter(|r| r.event == name).count() as f64;
    let n = rows.len() as f64;
    let pageviews = count("$pageview") / n;
    let autocapture = count("$autocapture") / n;
    assert!((0.30..0.60).contains(&pageviews), "pageviews {pageviews}");
    assert!(
        (0.15..0.45).contains(&autocapture),
        "autocapture {autocapture}"
    );
    for name in [
        "$pageleave",
        "$identify",
        "signed_up",
        "$groupidentify",
        "added_to_cart",
        "purchase",
        "feature_used",
        "survey shown",
        "survey sent",
        "survey dismissed",
    ] {
        assert!(count(name) > 0.0, "{name}");
    }
    assert!(count("purchase") < count("added_to_cart"));
    let utm = rows
        .iter()
        .filter(|r| r.properties.contains("\"utm_source\""))
        .count() as f64;
    assert!(utm > 0.0 && utm < count("$pageview") * 0.2, "utm {utm}");

    // Heavy tail: the busiest 10% of persons send at least 40% of the events.
    let mut per_person = vec![0u64; w.persons.len()];
    for e in &w.events {
        per_person[e.person as usize] += 1;
    }
    per_person.sort_unstable_by(|a, b| b.cmp(a));
    let top: u64 = per_person[..per_person.len() / 10].iter().sum();
    assert!(top as f64 / n >= 0.40, "top decile {}", top as f64 / n);
    assert!(per_person[0] as f64 / n < 0.05, "one person dominates");

    // Purchases carry revenue and currency; every timestamp is in the window.
    let p: Value = serde_json::from_str(
        &rows
            .iter()
            .find(|r| r.event == "purchase")
            .unwrap()
            .properties,
    )
    .unwrap();
    assert!(p["revenue"].as_f64().unwrap() > 0.0);
    assert!(p["currency"].is_string());
    let (start, end) = window(&c);
    assert!(
        rows.iter()
            .all(|r| r.timestamp_us >= start * 1000 && r.timestamp_us < end * 1000)
    );
}

#[test]
fn identify_joins_distinct_ids_into_the_first_ones_person() {
    let c = cfg(30_000, 2);
    let (_, rows) = rendered(&c);
    let person_of = |did: &str| -> Vec<&str> {
        let mut v: Vec<&str> = rows
            .iter()
            .filter(|r| r.distinct_id == did)
            .map(|r| r.person_id.as_str())
            .collect();
        v.dedup();
        v
    };
    let identifies: Vec<&Row> = rows.iter().filter(|r| r.event == "$identify").collect();
    assert!(identifies.len() > 50);
    let mut logins = 0;
    for r in identifies.iter().take(200) {
        let p: Value = serde_json::from_str(&r.properties).unwrap();
        let anon = p["$anon_distinct_id"].as_str().unwrap();
        assert!(r.distinct_id.starts_with("user-"));
        assert!(p["$set"]["plan"].is_string());
        assert_eq!(person_of(anon), vec![r.person_id.as_str()]);
        assert_eq!(person_of(&r.distinct_id), vec![r.person_id.as_str()]);
        if r.person_id != person_uuid(TeamId(1), anon).to_string() {
            logins += 1; // a second device's id joined the first device's person
        }
    }
    assert!(logins > 0);
    // A never-identified anonymous id is its own person, the uuid hedgerow gives it.
    let anon = rows
        .iter()
        .find(|r| {
            !r.distinct_id.starts_with("user-")
                && person_of(&r.distinct_id).len() == 1
                && !identifies
                    .iter()
                    .any(|i| i.properties.contains(&r.distinct_id))
        })
        .unwrap();
    assert_eq!(
        anon.person_id,
        person_uuid(TeamId(1), &anon.distinct_id).to_string()
    );
}

#[test]
fn every_event_is_inside_the_window() {
    // A short window makes many persons run into its end.
    for seed in 0..4 {
        let mut c = cfg(20_000, seed);
        c.days = 1;
        let w = simulate(&c);
        let (start, end) = window(&c);
        assert_eq!(w.events.len(), 20_000);
        assert!(
            w.events.iter().all(|e| e.ts_ms >= start && e.ts_ms < end),
            "seed {seed}"
        );
    }
}

#[test]
fn refuses_recent_windows_and_bad_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(100, 1);
    c.start = Utc::now().date_naive();
    assert!(generate(&c, dir.path()).unwrap_err().contains("48 hours"));
    assert!(generate(&cfg(0, 1), dir.path()).is_err());
}
