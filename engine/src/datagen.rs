//! `hedgerow gen`: a deterministic generator of PostHog web and product events for the
//! benchmark (`benches/bench.py`).
//!
//! The same `(events, seed, start, days, project API key)` always gives the same bytes. The
//! generator first simulates people, their devices and their sessions on a timeline (one
//! [`StdRng`] drawn in a fixed order, no hash-map iteration anywhere), then sorts the events
//! by time and renders each one as posthog-js sends it.
//!
//! The model:
//! - `events / 25` persons (at least one) with a Pareto(α = 1.2) activity weight capped at
//!   1000; a person's share of the events is proportional to it (largest-remainder rounding,
//!   so the total is exactly `events`). Heavy users start early in the window and stay.
//!   Every event falls inside `[start, start + days)`: what a person cannot fit before the
//!   end goes to the next person (after the last one, to extra light persons).
//! - A person's events come in sessions of about 8 events. Inside a session events are 1 s –
//!   20 min apart; between two sessions of the same person there are at least 30 minutes, so
//!   posthog-js' session rule gives exactly our `$session_id`s. A session can have a second
//!   tab (`$window_id`).
//! - Every session starts with a `$pageview` of a landing page chosen by its referrer; some
//!   session starts carry UTM tags. Then pageviews, `$autocapture` clicks (with an
//!   `elements_chain`), `feature_used`, the shop funnel (`/pricing` → `added_to_cart` →
//!   `/checkout` → `purchase` with `revenue` and `currency`), surveys (`survey shown`, then
//!   `survey sent` with `$survey_response` or `survey dismissed`), and a closing
//!   `$pageleave`.
//! - Some persons sign up: `$identify` (distinct_id becomes `user-…`, `$anon_distinct_id` is
//!   the device's anonymous id, `$set` email/plan/name), `signed_up`, and for most of them
//!   `$groupidentify` of their company, whose key is then in `$groups` of every later event.
//!   A signed-up person may use a second device; its first session logs in (`$identify`
//!   again) and the device's anonymous id joins the same person.
//!
//! `person_id` (Parquet only; capture bodies never carry it) is the person a distinct_id
//! finally belongs to after every `$identify` of the data set: UUIDv5 of
//! `"1:<the person's first anonymous distinct_id>"` in hedgerow's person namespace
//! ([`person_uuid`] for project 1). That is the id hedgerow gives the first distinct_id of
//! the person, and PostHog keeps the person of that first id when later ids are merged
//! into it. A second device's anonymous id that never logs in stays its own person.
//!
//! Output files in the output directory:
//! - `batches.jsonl.gz`: one `/batch/` body per line (`{"api_key", "historical_migration":
//!   true, "batch": [...]}`), in time order. Every line is its own gzip member, so the file
//!   is one valid gzip stream and each member, cut out with `batches.idx`, is a ready gzip
//!   request body.
//! - `batches.idx`: one line per body: `offset<TAB>length<TAB>events` of its gzip member.
//! - `events.parquet`: the same events, one row each, with the columns of
//!   [`parquet_schema`]; `properties` is the JSON text hedgerow stores (top-level `$set`
//!   and `$set_once` lifted into it).
//! - `manifest.json`: the parameters and counts (events per name, persons, sessions, time
//!   range, a heavy user's distinct_id).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::model::TeamId;
use crate::model::person_uuid;
use arrow::array::{ArrayRef, RecordBatch, StringBuilder, TimestampMicrosecondBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use chrono::{DateTime, NaiveDate, Utc};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};
use uuid::Uuid;

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenConfig {
    pub events: u64,
    pub seed: u64,
    /// First day of the time window (UTC).
    pub start: NaiveDate,
    /// Length of the window in days.
    pub days: u32,
    pub api_key: String,
    /// Events per `/batch/` body.
    pub batch_size: usize,
}

/// What was generated.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GenSummary {
    pub events: u64,
    pub persons: u64,
    pub sessions: u64,
    pub batches: u64,
    pub json_bytes: u64,
    pub gzip_bytes: u64,
    pub first_timestamp: String,
    pub last_timestamp: String,
    /// Events per event name.
    pub event_counts: std::collections::BTreeMap<String, u64>,
    /// The distinct_id with the most events (for point lookups).
    pub top_distinct_id: String,
}

const SESSION_GAP_MS: i64 = 30 * 60 * 1000;
const MEAN_SESSION_EVENTS: f64 = 8.0;
const EVENTS_PER_PERSON: u64 = 25;
const PARETO_ALPHA: f64 = 1.2;
const MAX_WEIGHT: f64 = 1000.0;
const LIB_VERSION: &str = "1.194.3";

// ------------------------------------------------------------------------------------------
// Small deterministic helpers

/// SplitMix64: a stateless mix for per-entity randomness (ids, render-time details), so
/// rendering an event never depends on the order others were rendered in.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn mix2(a: u64, b: u64) -> u64 {
    mix(a ^ mix(b))
}

/// A UUIDv7 with the given Unix milliseconds and pseudo-random bits.
fn uuid7(ms: i64, bits: u64) -> Uuid {
    let r = ((mix(bits) as u128) << 64) | mix(bits ^ 0x5555) as u128;
    let rand_a = (r >> 64) & 0xfff;
    let rand_b = r & ((1u128 << 62) - 1);
    let v = ((ms.max(0) as u128 & ((1u128 << 48) - 1)) << 80)
        | (0x7u128 << 76)
        | (rand_a << 64)
        | (0b10u128 << 62)
        | rand_b;
    Uuid::from_u128(v)
}

/// A cumulative table for weighted choices.
struct Weighted {
    cum: Vec<f64>,
}

impl Weighted {
    fn new(weights: impl IntoIterator<Item = f64>) -> Self {
        let mut acc = 0.0;
        let cum = weights
            .into_iter()
            .map(|w| {
                acc += w;
                acc
            })
            .collect();
        Weighted { cum }
    }

    /// Zipf(s) over `n` items: item `i` has weight `1 / (i + 1)^s`.
    fn zipf(n: usize, s: f64) -> Self {
        Self::new((0..n).map(|i| 1.0 / ((i + 1) as f64).powf(s)))
    }

    fn pick(&self, u: f64) -> usize {
        let total = *self.cum.last().expect("non-empty");
        let x = u * total;
        self.cum
            .partition_point(|c| *c <= x)
            .min(self.cum.len() - 1)
    }
}

fn pick<T: Copy>(rng: &mut StdRng, items: &[(T, f64)]) -> T {
    let total: f64 = items.iter().map(|i| i.1).sum();
    let mut x = rng.random::<f64>() * total;
    for (v, w) in items {
        if x < *w {
            return *v;
        }
        x -= w;
    }
    items.last().expect("non-empty").0
}

fn normal(rng: &mut StdRng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(1e-12);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn exponential(rng: &mut StdRng, mean: f64) -> f64 {
    -mean * (1.0 - rng.random::<f64>()).ln()
}

// ------------------------------------------------------------------------------------------
// The site

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Area {
    Marketing,
    Blog,
    Docs,
    App,
    Shop,
}

struct Page {
    host: &'static str,
    path: String,
    title: String,
    area: Area,
}

const HOST_WWW: &str = "example.com";
const HOST_APP: &str = "app.example.com";
const HOST_DOCS: &str = "docs.example.com";

const BLOG_SLUGS: &[&str] = &[
    "launch-week",
    "how-we-price",
    "product-analytics-101",
    "session-replay-tips",
    "funnels-explained",
    "retention-curves",
    "our-stack",
    "hiring-engineers",
    "open-source-analytics",
    "feature-flags-guide",
    "ab-testing-mistakes",
    "privacy-by-design",
    "year-in-review",
    "self-hosting",
    "sql-for-pms",
    "north-star-metrics",
    "churn-signals",
    "onboarding-teardown",
    "growth-loops",
    "startup-metrics",
];
const DOC_SECTIONS: &[&str] = &[
    "getting-started",
    "install",
    "install/javascript",
    "install/python",
    "install/node",
    "api",
    "api/capture",
    "api/query",
    "hogql",
    "hogql/functions",
    "data/events",
    "data/persons",
    "feature-flags",
    "experiments",
    "surveys",
    "session-replay",
    "self-host",
    "troubleshooting",
];
const N_INSIGHTS: usize = 150;

/// Page indexes of fixed pages, for the simulation's rules.
struct Site {
    pages: Vec<Page>,
    home: u16,
    pricing: u16,
    signup: u16,
    login: u16,
    checkout: u16,
    checkout_done: u16,
    app_home: u16,
    marketing: Vec<u16>,
    marketing_w: Weighted,
    blog: Vec<u16>,
    blog_w: Weighted,
    docs: Vec<u16>,
    docs_w: Weighted,
    app: Vec<u16>,
    app_w: Weighted,
}

impl Site {
    fn new(seed: u64) -> Self {
        let mut pages = Vec::new();
        let mut add = |host: &'static str, path: String, title: &str, area: Area| {
            pages.push(Page {
                host,
                path,
                title: title.to_owned(),
                area,
            });
            (pages.len() - 1) as u16
        };
        let home = add(
            HOST_WWW,
            "/".into(),
            "Example — product analytics",
            Area::Marketing,
        );
        let pricing = add(HOST_WWW, "/pricing".into(), "Pricing", Area::Shop);
        let mut marketing = vec![home, pricing];
        for (p, t) in [
            ("/features", "Features"),
            ("/features/analytics", "Product analytics"),
            ("/features/session-replay", "Session replay"),
            ("/customers", "Customers"),
            ("/about", "About us"),
            ("/careers", "Careers"),
            ("/contact", "Contact"),
            ("/blog", "Blog"),
        ] {
            marketing.push(add(HOST_WWW, p.into(), t, Area::Marketing));
        }
        let signup = add(HOST_WWW, "/signup".into(), "Sign up", Area::Marketing);
        let login = add(HOST_APP, "/login".into(), "Log in", Area::Marketing);
        marketing.push(signup);
        let marketing_w = Weighted::new([30.0, 14.0, 9.0, 5.0, 4.0, 3.0, 2.0, 1.5, 1.5, 6.0, 4.0]);
        let blog: Vec<u16> = BLOG_SLUGS
            .iter()
            .map(|s| add(HOST_WWW, format!("/blog/{s}"), s, Area::Blog))
            .collect();
        let blog_w = Weighted::zipf(blog.len(), 1.1);
        let mut docs = vec![add(HOST_DOCS, "/docs".into(), "Docs", Area::Docs)];
        docs.extend(
            DOC_SECTIONS
                .iter()
                .map(|s| add(HOST_DOCS, format!("/docs/{s}"), s, Area::Docs)),
        );
        let docs_w = Weighted::zipf(docs.len(), 0.9);
        let app_home = add(HOST_APP, "/".into(), "Home", Area::App);
        let mut app = vec![app_home];
        for (p, t) in [
            ("/dashboard", "Dashboard"),
            ("/insights", "Insights"),
            ("/events", "Activity"),
            ("/persons", "Persons"),
            ("/settings", "Settings"),
            ("/settings/billing", "Billing"),
        ] {
            app.push(add(HOST_APP, p.into(), t, Area::App));
        }
        let fixed_app = app.len();
        for i in 0..N_INSIGHTS {
            let id = short_id(mix2(seed, 0x1751_0000 + i as u64), 8);
            app.push(add(
                HOST_APP,
                format!("/insights/{id}"),
                "Insight",
                Area::App,
            ));
        }
        let app_w = Weighted::new((0..app.len()).map(|i| {
            if i < fixed_app {
                [20.0, 25.0, 10.0, 6.0, 4.0, 3.0, 1.0][i]
            } else {
                40.0 / ((i - fixed_app + 1) as f64).powf(1.05)
            }
        }));
        let checkout = add(HOST_WWW, "/checkout".into(), "Checkout", Area::Shop);
        let checkout_done = add(
            HOST_WWW,
            "/checkout/success".into(),
            "Thank you",
            Area::Shop,
        );
        Site {
            pages,
            home,
            pricing,
            signup,
            login,
            checkout,
            checkout_done,
            app_home,
            marketing,
            marketing_w,
            blog,
            blog_w,
            docs,
            docs_w,
            app,
            app_w,
        }
    }

    fn marketing(&self, rng: &mut StdRng) -> u16 {
        self.marketing[self.marketing_w.pick(rng.random())]
    }
    fn blog(&self, rng: &mut StdRng) -> u16 {
        self.blog[self.blog_w.pick(rng.random())]
    }
    fn docs(&self, rng: &mut StdRng) -> u16 {
        self.docs[self.docs_w.pick(rng.random())]
    }
    fn app(&self, rng: &mut StdRng) -> u16 {
        self.app[self.app_w.pick(rng.random())]
    }

    /// The next page of a visitor on `cur`.
    fn next(&self, rng: &mut StdRng, cur: u16, identified: bool) -> u16 {
        let area = self.pages[cur as usize].area;
        let r: f64 = rng.random();
        if identified {
            match area {
                Area::App if r < 0.85 => self.app(rng),
                Area::Docs if r < 0.6 => self.docs(rng),
                _ if r < 0.70 => self.app(rng),
                _ if r < 0.82 => self.docs(rng),
                _ if r < 0.90 => self.pricing,
                _ => self.marketing(rng),
            }
        } else {
            match area {
                Area::Blog if r < 0.45 => self.blog(rng),
                Area::Docs if r < 0.65 => self.docs(rng),
                _ if r < 0.55 => self.marketing(rng),
                _ if r < 0.70 => self.blog(rng),
                _ if r < 0.82 => self.docs(rng),
                _ if r < 0.92 => self.pricing,
                _ if r < 0.97 => self.signup,
                _ => self.login,
            }
        }
    }
}

fn short_id(seed: u64, len: usize) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut s = String::with_capacity(len);
    let mut x = 0;
    for i in 0..len {
        // A u64 holds ten base-62 digits; then draw fresh bits.
        if i % 10 == 0 {
            x = mix(seed.wrapping_add(i as u64));
        }
        s.push(ALPHABET[(x % 62) as usize] as char);
        x /= 62;
    }
    s
}

// ------------------------------------------------------------------------------------------
// Devices, people, sessions

const DEVICE_TYPES: &[(u8, f64)] = &[(0, 0.60), (1, 0.36), (2, 0.04)];
const DEVICE_TYPE_NAMES: &[&str] = &["Desktop", "Mobile", "Tablet"];
const OS_NAMES: &[&str] = &[
    "Windows",
    "Mac OS X",
    "Linux",
    "Chrome OS",
    "iOS",
    "Android",
];
const OS_VERSIONS: &[&[&str]] = &[
    &["10", "11"],
    &["14.6.1", "15.3.2", "13.6.9"],
    &["6.8", "6.11"],
    &["14541.0.0"],
    &["17.6.1", "18.3.2", "18.5"],
    &["14", "15", "13"],
];
const BROWSER_NAMES: &[&str] = &[
    "Chrome",
    "Safari",
    "Firefox",
    "Microsoft Edge",
    "Opera",
    "Mobile Safari",
    "Chrome iOS",
    "Firefox iOS",
    "Samsung Internet",
];
const BROWSER_VERSIONS: &[&[u32]] = &[
    &[131, 132, 133, 134],
    &[17, 18],
    &[133, 134, 135],
    &[131, 132, 133],
    &[115, 116],
    &[17, 18],
    &[131, 133],
    &[134],
    &[26, 27],
];

fn os_for(rng: &mut StdRng, device_type: u8) -> u8 {
    match device_type {
        0 => pick(rng, &[(0, 0.55), (1, 0.33), (2, 0.08), (3, 0.04)]),
        1 => pick(rng, &[(4, 0.52), (5, 0.48)]),
        _ => pick(rng, &[(4, 0.65), (5, 0.35)]),
    }
}

fn browser_for(rng: &mut StdRng, os: u8) -> u8 {
    match os {
        0 => pick(rng, &[(0, 0.68), (3, 0.20), (2, 0.09), (4, 0.03)]),
        1 => pick(rng, &[(0, 0.55), (1, 0.35), (2, 0.07), (3, 0.03)]),
        2 => pick(rng, &[(0, 0.6), (2, 0.4)]),
        3 => 0,
        4 => pick(rng, &[(5, 0.82), (6, 0.14), (7, 0.04)]),
        _ => pick(rng, &[(0, 0.78), (8, 0.17), (2, 0.05)]),
    }
}

const SCREENS: &[&[((u16, u16), f64)]] = &[
    &[
        ((1920, 1080), 0.35),
        ((1536, 864), 0.12),
        ((1440, 900), 0.10),
        ((1728, 1117), 0.10),
        ((2560, 1440), 0.12),
        ((1366, 768), 0.11),
        ((1280, 720), 0.10),
    ],
    &[
        ((390, 844), 0.30),
        ((393, 873), 0.15),
        ((414, 896), 0.15),
        ((375, 667), 0.10),
        ((412, 915), 0.20),
        ((360, 800), 0.10),
    ],
    &[((820, 1180), 0.4), ((768, 1024), 0.4), ((800, 1280), 0.2)],
];

const LANGUAGES: &[((&str, &str, &str), f64)] = &[
    (("en-US", "America/New_York", "USD"), 0.30),
    (("en-US", "America/Los_Angeles", "USD"), 0.15),
    (("en-US", "America/Chicago", "USD"), 0.08),
    (("en-GB", "Europe/London", "GBP"), 0.10),
    (("de-DE", "Europe/Berlin", "EUR"), 0.08),
    (("fr-FR", "Europe/Paris", "EUR"), 0.06),
    (("es-ES", "Europe/Madrid", "EUR"), 0.05),
    (("pt-BR", "America/Sao_Paulo", "USD"), 0.05),
    (("nl-NL", "Europe/Amsterdam", "EUR"), 0.03),
    (("ja-JP", "Asia/Tokyo", "USD"), 0.04),
    (("en-IN", "Asia/Kolkata", "USD"), 0.06),
];

#[derive(Debug, Clone, Copy)]
struct Device {
    device_type: u8,
    os: u8,
    os_version: u8,
    browser: u8,
    browser_version: u32,
    screen: (u16, u16),
    /// When the device's anonymous id was made (its first event).
    anon_ms: i64,
}

impl Device {
    fn new(rng: &mut StdRng) -> Self {
        let device_type = pick(rng, DEVICE_TYPES);
        let os = os_for(rng, device_type);
        let os_version = rng.random_range(0..OS_VERSIONS[os as usize].len()) as u8;
        let browser = browser_for(rng, os);
        let versions = BROWSER_VERSIONS[browser as usize];
        let browser_version = versions[rng.random_range(0..versions.len())];
        let screen = pick(rng, SCREENS[device_type as usize]);
        Device {
            device_type,
            os,
            os_version,
            browser,
            browser_version,
            screen,
            anon_ms: 0,
        }
    }
}

struct Person {
    devices: Vec<Device>,
    lang: u8,
    /// Set when the person signs up; the plan chosen.
    plan: u8,
    company: Option<u32>,
    /// Per device: did its anonymous id ever `$identify` into the person?
    device_merged: Vec<bool>,
    identified: bool,
    /// Has sent `$groupidentify` (its events carry `$groups` from then on).
    grouped: bool,
}

const PLANS: &[(u8, f64)] = &[(0, 0.70), (1, 0.22), (2, 0.08)];
const PLAN_NAMES: &[&str] = &["free", "pro", "team"];
const INDUSTRIES: &[&str] = &[
    "saas",
    "ecommerce",
    "fintech",
    "media",
    "health",
    "education",
];
const FEATURES: &[&str] = &[
    "dashboards",
    "insights",
    "funnels",
    "retention",
    "session_replay",
    "feature_flags",
    "exports",
    "sql_editor",
];
const PRODUCTS: &[(&str, f64)] = &[
    ("Starter plan", 29.0),
    ("Pro plan", 99.0),
    ("Team plan", 249.0),
    ("Extra seats", 12.5),
    ("Hoodie", 54.99),
];
const SURVEYS: &[&str] = &["NPS Q1", "Onboarding CSAT", "What is missing?"];
const SURVEY_TEXTS: &[&str] = &[
    "Faster dashboards please",
    "More integrations",
    "Love it",
    "Better docs for the API",
    "Dark mode",
    "Cheaper plans for startups",
];
const EVENT_TYPES: &[&str] = &["click", "click", "click", "click", "submit", "change"];

/// Autocapture element chains (PostHog's `elements_chain` text), with the element text.
const CHAINS: &[(&str, &str)] = &[
    (
        "a.nav-link:attr__class=\"nav-link\"attr__href=\"/pricing\"href=\"/pricing\"nth-child=\"2\"nth-of-type=\"1\"text=\"Pricing\";li:nth-child=\"2\"nth-of-type=\"2\";ul.nav:attr__class=\"nav\"nth-child=\"1\"nth-of-type=\"1\";nav:nth-child=\"1\"nth-of-type=\"1\";body:nth-child=\"2\"nth-of-type=\"1\"",
        "Pricing",
    ),
    (
        "button.btn.btn-primary:attr__class=\"btn btn-primary\"attr__type=\"button\"nth-child=\"1\"nth-of-type=\"1\"text=\"Get started\";div.hero:attr__class=\"hero\"nth-child=\"1\"nth-of-type=\"1\";main:nth-child=\"2\"nth-of-type=\"1\";body:nth-child=\"2\"nth-of-type=\"1\"",
        "Get started",
    ),
    (
        "button.btn:attr__class=\"btn\"attr__id=\"signup-submit\"attr__type=\"submit\"attr_id=\"signup-submit\"nth-child=\"4\"nth-of-type=\"1\"text=\"Create account\";form.signup:attr__class=\"signup\"nth-child=\"1\"nth-of-type=\"1\";body:nth-child=\"2\"nth-of-type=\"1\"",
        "Create account",
    ),
    (
        "a:attr__href=\"/docs/getting-started\"href=\"/docs/getting-started\"nth-child=\"1\"nth-of-type=\"1\"text=\"Read the docs\";p:nth-child=\"3\"nth-of-type=\"2\";article:nth-child=\"1\"nth-of-type=\"1\";body:nth-child=\"2\"nth-of-type=\"1\"",
        "Read the docs",
    ),
    (
        "button.add-to-cart:attr__class=\"add-to-cart\"attr__data-attr=\"add-to-cart\"nth-child=\"2\"nth-of-type=\"2\"text=\"Add to cart\";div.plan-card:attr__class=\"plan-card\"nth-child=\"2\"nth-of-type=\"2\";section.plans:attr__class=\"plans\"nth-child=\"1\"nth-of-type=\"1\";body:nth-child=\"2\"nth-of-type=\"1\"",
        "Add to cart",
    ),
    (
        "span:nth-child=\"1\"nth-of-type=\"1\"text=\"Save\";button.LemonButton:attr__class=\"LemonButton\"attr__data-attr=\"insight-save-button\"nth-child=\"3\"nth-of-type=\"2\";div.TopBar:attr__class=\"TopBar\"nth-child=\"1\"nth-of-type=\"1\";body:nth-child=\"2\"nth-of-type=\"1\"",
        "Save",
    ),
    (
        "input.search:attr__class=\"search\"attr__placeholder=\"Search\"attr__type=\"text\"nth-child=\"1\"nth-of-type=\"1\";div.toolbar:attr__class=\"toolbar\"nth-child=\"2\"nth-of-type=\"1\";body:nth-child=\"2\"nth-of-type=\"1\"",
        "",
    ),
    (
        "a.sidebar-item:attr__class=\"sidebar-item\"attr__href=\"/dashboard\"href=\"/dashboard\"nth-child=\"2\"nth-of-type=\"2\"text=\"Dashboards\";nav.sidebar:attr__class=\"sidebar\"nth-child=\"1\"nth-of-type=\"1\";body:nth-child=\"2\"nth-of-type=\"1\"",
        "Dashboards",
    ),
    (
        "button.close:attr__aria-label=\"Close\"attr__class=\"close\"nth-child=\"1\"nth-of-type=\"1\";div.modal:attr__class=\"modal\"nth-child=\"5\"nth-of-type=\"3\";body:nth-child=\"2\"nth-of-type=\"1\"",
        "",
    ),
];

/// Referrers of sessions: (referrer URL or `$direct`, weight).
const REFERRERS: &[(&str, f64)] = &[
    ("$direct", 0.45),
    ("https://www.google.com/", 0.28),
    ("https://www.bing.com/", 0.03),
    ("https://duckduckgo.com/", 0.02),
    ("https://news.ycombinator.com/", 0.04),
    ("https://t.co/", 0.04),
    ("https://www.linkedin.com/", 0.03),
    ("https://github.com/", 0.04),
    ("https://www.reddit.com/", 0.04),
    ("https://www.facebook.com/", 0.03),
];

/// UTM tags of campaigns: (utm_source, utm_medium, utm_campaign, referrer index).
const CAMPAIGNS: &[(&str, &str, &str, u8)] = &[
    ("google", "cpc", "brand-search", 1),
    ("google", "cpc", "competitor-keywords", 1),
    ("newsletter", "email", "weekly-digest", 0),
    ("newsletter", "email", "product-update", 0),
    ("twitter", "social", "launch-week", 5),
    ("linkedin", "paid_social", "b2b-q1", 6),
    ("facebook", "paid_social", "retargeting", 9),
];

fn referring_domain(referrer: &str) -> &str {
    if referrer == "$direct" {
        return referrer;
    }
    referrer
        .trim_start_matches("https://")
        .trim_end_matches('/')
}

struct Session {
    start_ms: i64,
    person: u32,
    device: u8,
    referrer: u8,
    /// 0: none, else 1 + index into [`CAMPAIGNS`].
    utm: u8,
    landing: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Pageview,
    Pageleave,
    Autocapture,
    Identify,
    SignedUp,
    GroupIdentify,
    AddedToCart,
    Purchase,
    FeatureUsed,
    SurveyShown,
    SurveySent,
    SurveyDismissed,
}

const KINDS: &[Kind] = &[
    Kind::Pageview,
    Kind::Pageleave,
    Kind::Autocapture,
    Kind::Identify,
    Kind::SignedUp,
    Kind::GroupIdentify,
    Kind::AddedToCart,
    Kind::Purchase,
    Kind::FeatureUsed,
    Kind::SurveyShown,
    Kind::SurveySent,
    Kind::SurveyDismissed,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Pageview => "$pageview",
            Kind::Pageleave => "$pageleave",
            Kind::Autocapture => "$autocapture",
            Kind::Identify => "$identify",
            Kind::SignedUp => "signed_up",
            Kind::GroupIdentify => "$groupidentify",
            Kind::AddedToCart => "added_to_cart",
            Kind::Purchase => "purchase",
            Kind::FeatureUsed => "feature_used",
            Kind::SurveyShown => "survey shown",
            Kind::SurveySent => "survey sent",
            Kind::SurveyDismissed => "survey dismissed",
        }
    }
}

/// One simulated event: everything rendering needs, compactly.
#[derive(Debug, Clone, Copy)]
struct Ev {
    ts_ms: i64,
    /// Generation order: a tie-break for equal timestamps and the event's random stream.
    ord: u32,
    person: u32,
    session: u32,
    kind: Kind,
    page: u16,
    /// The page before (pageview) or the page left (pageleave); `u16::MAX` when none.
    prev_page: u16,
    /// Page visit number within the session (for `$pageview_id`).
    visit: u16,
    device: u8,
    /// Sent with the identified distinct_id (else the device's anonymous id).
    identified: bool,
    /// Whether the person's company is in `$groups`.
    grouped: bool,
    window: u8,
    /// Kind-specific: seconds on page (pageleave), element chain index (autocapture),
    /// product (cart, purchase), feature, survey.
    extra: u32,
}

struct World {
    site: Site,
    persons: Vec<Person>,
    sessions: Vec<Session>,
    events: Vec<Ev>,
    n_companies: u32,
}

fn window(cfg: &GenConfig) -> (i64, i64) {
    let start = cfg
        .start
        .and_hms_opt(0, 0, 0)
        .expect("midnight")
        .and_utc()
        .timestamp_millis();
    (start, start + cfg.days.max(1) as i64 * 86_400_000)
}

/// Runs the whole simulation; events come out sorted by (timestamp, generation order).
fn simulate(cfg: &GenConfig) -> World {
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let site = Site::new(cfg.seed);
    let n = cfg.events;
    let n_persons = (n / EVENTS_PER_PERSON).max(1) as usize;
    let n_companies = (n_persons as u32 / 40).max(1);
    let company_w = Weighted::zipf(n_companies as usize, 1.0);
    let (w_start, w_end) = window(cfg);
    let span = (w_end - w_start) as f64;

    // Activity weights and the exact event budget of each person.
    let weights: Vec<f64> = (0..n_persons)
        .map(|_| {
            let u: f64 = rng.random();
            (1.0 - u).powf(-1.0 / PARETO_ALPHA).min(MAX_WEIGHT)
        })
        .collect();
    let total_w: f64 = weights.iter().sum();
    let mut budgets: Vec<u64> = Vec::with_capacity(n_persons);
    let mut fracs: Vec<(f64, usize)> = Vec::with_capacity(n_persons);
    for (i, w) in weights.iter().enumerate() {
        let exact = n as f64 * w / total_w;
        budgets.push(exact.floor() as u64);
        fracs.push((exact - exact.floor(), i));
    }
    let missing = n - budgets.iter().sum::<u64>();
    fracs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, i) in fracs.iter().take(missing as usize) {
        budgets[*i] += 1;
    }

    let mut persons = Vec::with_capacity(n_persons);
    let mut sessions: Vec<Session> = Vec::new();
    let mut events: Vec<Ev> = Vec::with_capacity(n as usize);
    // Events a person could not fit before the window's end go to the next person; after
    // the last one, to extra light persons, until every event is placed.
    let mut carry = 0u64;
    let mut pi = 0usize;
    while pi < weights.len() || carry > 0 {
        let (w, budget, late) = match weights.get(pi) {
            Some(w) => (*w, budgets[pi] + carry, 0.97),
            None => (1.0, carry, 0.5),
        };
        let mut person = Person {
            devices: vec![Device::new(&mut rng)],
            lang: pick(
                &mut rng,
                &LANGUAGES
                    .iter()
                    .enumerate()
                    .map(|(i, l)| (i as u8, l.1))
                    .collect::<Vec<_>>(),
            ),
            plan: pick(&mut rng, PLANS),
            company: None,
            device_merged: vec![false],
            identified: false,
            grouped: false,
        };
        let signs_up = rng.random::<f64>() < (0.15 + 0.12 * w.ln()).clamp(0.0, 0.9);
        let identify_at = if signs_up {
            ((budget as f64) * 0.5 * rng.random::<f64>().powi(2)) as u64
        } else {
            u64::MAX
        };
        if signs_up && rng.random::<f64>() < 0.6 {
            person.company = Some(company_w.pick(rng.random()) as u32);
        }
        let has_second_device = signs_up && rng.random::<f64>() < 0.3;
        if has_second_device {
            person.devices.push(Device::new(&mut rng));
            person.device_merged.push(false);
        }
        // Heavy users arrive early and stay; light ones arrive any time.
        let mut t = w_start + (rng.random::<f64>() * span * (4.0 / w).min(1.0) * late) as i64;
        person.devices[0].anon_ms = t;
        let mut left = budget;
        let mut done = 0u64;
        // Per device: has this browser logged in (posthog-js keeps the identity)?
        let mut device_identified = vec![false; person.devices.len()];
        let mut first_session = true;
        while left > 0 {
            if !first_session {
                // At least 30 minutes after the last event, spread over what is left.
                let sessions_left = (left as f64 / MEAN_SESSION_EVENTS).max(1.0);
                let room = (w_end - t - SESSION_GAP_MS).max(0) as f64;
                let mut extra = exponential(&mut rng, room / sessions_left);
                if extra > room * 0.98 {
                    extra = rng.random::<f64>() * room * 0.98;
                }
                t += SESSION_GAP_MS + 1000 + extra as i64;
                if t >= w_end - 60_000 {
                    break;
                }
            }
            first_session = false;
            let device =
                if person.devices.len() > 1 && person.identified && rng.random::<f64>() < 0.35 {
                    1u8
                } else {
                    0u8
                };
            if device == 1 && person.devices[1].anon_ms == 0 {
                person.devices[1].anon_ms = t;
            }
            let len = (1.0 + exponential(&mut rng, MEAN_SESSION_EVENTS - 1.0)).min(80.0) as u64;
            let len = len.min(left);
            let si = sessions.len() as u32;
            let referrer = pick(
                &mut rng,
                &REFERRERS
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (i as u8, r.1))
                    .collect::<Vec<_>>(),
            );
            let mut utm = 0u8;
            let mut referrer = referrer;
            if rng.random::<f64>() < 0.12 {
                let c = rng.random_range(0..CAMPAIGNS.len());
                utm = c as u8 + 1;
                referrer = CAMPAIGNS[c].3;
            }
            let identified_now = device_identified[device as usize];
            let landing = landing_page(&site, &mut rng, referrer, utm, identified_now);
            sessions.push(Session {
                start_ms: t,
                person: pi as u32,
                device,
                referrer,
                utm,
                landing,
            });
            let two_windows = rng.random::<f64>() < 0.12;
            let mut state = SessionState {
                t,
                page: landing,
                visit: 0,
                identified: identified_now,
                session: si,
                person: pi as u32,
                device,
                window: 0,
                cart: false,
            };
            let mut emitted = 0u64;
            let push = |state: &SessionState,
                        kind: Kind,
                        page: u16,
                        prev: u16,
                        extra: u32,
                        events: &mut Vec<Ev>,
                        person: &Person| {
                events.push(Ev {
                    ts_ms: state.t,
                    ord: events.len() as u32,
                    person: state.person,
                    session: state.session,
                    kind,
                    page,
                    prev_page: prev,
                    visit: state.visit,
                    device: state.device,
                    identified: state.identified,
                    grouped: state.identified && person.grouped,
                    window: state.window,
                    extra,
                });
            };
            // The landing pageview.
            push(
                &state,
                Kind::Pageview,
                landing,
                u16::MAX,
                0,
                &mut events,
                &person,
            );
            emitted += 1;
            while emitted < len {
                // Time passes: a log-normal pause of about 20 s, capped at 20 minutes.
                let pause = (20_000.0 * normal(&mut rng).exp()).clamp(1000.0, 1_200_000.0);
                if state.t + pause as i64 >= w_end {
                    break;
                }
                state.t += pause as i64;
                if two_windows && state.window == 0 && emitted * 2 >= len {
                    state.window = 1;
                }
                let need_login = device == 1 && !state.identified;
                let sign_up = !person.identified && done + emitted >= identify_at;
                if sign_up || need_login {
                    // $identify, then (first time) signed_up and the company.
                    state.identified = true;
                    push(
                        &state,
                        Kind::Identify,
                        state.page,
                        u16::MAX,
                        0,
                        &mut events,
                        &person,
                    );
                    emitted += 1;
                    device_identified[device as usize] = true;
                    person.device_merged[device as usize] = true;
                    if sign_up {
                        person.identified = true;
                        if emitted < len && state.t + 200 < w_end {
                            state.t += 200;
                            push(
                                &state,
                                Kind::SignedUp,
                                state.page,
                                u16::MAX,
                                rng.random_range(0..3),
                                &mut events,
                                &person,
                            );
                            emitted += 1;
                        }
                        if person.company.is_some() && emitted < len && state.t + 150 < w_end {
                            state.t += 150;
                            person.grouped = true;
                            push(
                                &state,
                                Kind::GroupIdentify,
                                state.page,
                                u16::MAX,
                                0,
                                &mut events,
                                &person,
                            );
                            emitted += 1;
                        }
                    }
                    continue;
                }
                let r: f64 = rng.random();
                let page = state.page;
                let area = site.pages[page as usize].area;
                if state.cart && page == site.checkout && r < 0.55 {
                    let product = rng.random_range(0..PRODUCTS.len() as u32)
                        | (rng.random_range(1..4u32) << 8);
                    push(
                        &state,
                        Kind::Purchase,
                        page,
                        u16::MAX,
                        product,
                        &mut events,
                        &person,
                    );
                    emitted += 1;
                    state.cart = false;
                    if emitted < len && state.t + 800 < w_end {
                        state.t += 800;
                        state.visit += 1;
                        push(
                            &state,
                            Kind::Pageview,
                            site.checkout_done,
                            page,
                            0,
                            &mut events,
                            &person,
                        );
                        state.page = site.checkout_done;
                        emitted += 1;
                    }
                } else if state.cart && r < 0.5 {
                    state.visit += 1;
                    push(
                        &state,
                        Kind::Pageview,
                        site.checkout,
                        page,
                        0,
                        &mut events,
                        &person,
                    );
                    state.page = site.checkout;
                    emitted += 1;
                } else if page == site.pricing && r < 0.25 {
                    let product = rng.random_range(0..PRODUCTS.len() as u32);
                    push(
                        &state,
                        Kind::AddedToCart,
                        page,
                        u16::MAX,
                        product,
                        &mut events,
                        &person,
                    );
                    state.cart = true;
                    emitted += 1;
                } else if r < 0.03 && len >= 3 {
                    let survey = rng.random_range(0..SURVEYS.len() as u32);
                    push(
                        &state,
                        Kind::SurveyShown,
                        page,
                        u16::MAX,
                        survey,
                        &mut events,
                        &person,
                    );
                    emitted += 1;
                    let delay = (3000.0 + exponential(&mut rng, 15_000.0)) as i64;
                    if emitted < len && state.t + delay < w_end {
                        state.t += delay;
                        let answer = rng.random_range(0..1000u32);
                        let kind = if rng.random::<f64>() < 0.6 {
                            Kind::SurveySent
                        } else {
                            Kind::SurveyDismissed
                        };
                        push(
                            &state,
                            kind,
                            page,
                            u16::MAX,
                            survey | (answer << 4),
                            &mut events,
                            &person,
                        );
                        emitted += 1;
                    }
                } else if area == Area::App && r < 0.18 {
                    let feature = rng.random_range(0..FEATURES.len() as u32);
                    push(
                        &state,
                        Kind::FeatureUsed,
                        page,
                        u16::MAX,
                        feature,
                        &mut events,
                        &person,
                    );
                    emitted += 1;
                } else if r < 0.50 {
                    let chain = rng.random_range(0..CHAINS.len() as u32);
                    let ty = rng.random_range(0..EVENT_TYPES.len() as u32);
                    push(
                        &state,
                        Kind::Autocapture,
                        page,
                        u16::MAX,
                        chain | (ty << 8),
                        &mut events,
                        &person,
                    );
                    emitted += 1;
                } else if emitted + 1 == len && r < 0.8 {
                    let secs = ((state.t - session_page_start(&events, page)) / 1000).max(0) as u32;
                    push(
                        &state,
                        Kind::Pageleave,
                        page,
                        page,
                        secs,
                        &mut events,
                        &person,
                    );
                    emitted += 1;
                } else {
                    let next = site.next(&mut rng, page, state.identified);
                    state.visit += 1;
                    push(&state, Kind::Pageview, next, page, 0, &mut events, &person);
                    state.page = next;
                    emitted += 1;
                }
                if state.t - sessions[si as usize].start_ms > 4 * 3_600_000 {
                    break;
                }
            }
            left -= emitted;
            done += emitted;
            t = state.t;
        }
        carry = left;
        persons.push(person);
        pi += 1;
    }
    events.sort_by(|a, b| a.ts_ms.cmp(&b.ts_ms).then(a.ord.cmp(&b.ord)));
    World {
        site,
        persons,
        sessions,
        events,
        n_companies,
    }
}

/// When the visitor arrived on `page` in the current session: the timestamp of the latest
/// pageview of it among the last events.
fn session_page_start(events: &[Ev], page: u16) -> i64 {
    events
        .iter()
        .rev()
        .take(100)
        .find(|e| e.kind == Kind::Pageview && e.page == page)
        .map_or(0, |e| e.ts_ms)
}

struct SessionState {
    t: i64,
    page: u16,
    visit: u16,
    identified: bool,
    session: u32,
    person: u32,
    device: u8,
    window: u8,
    cart: bool,
}

fn landing_page(site: &Site, rng: &mut StdRng, referrer: u8, utm: u8, identified: bool) -> u16 {
    if utm > 0 {
        let (_, medium, _, _) = CAMPAIGNS[utm as usize - 1];
        return match medium {
            "cpc" if rng.random::<f64>() < 0.5 => site.pricing,
            "cpc" => site.home,
            "email" => site.blog(rng),
            _ => site.home,
        };
    }
    let r: f64 = rng.random();
    match REFERRERS[referrer as usize].0 {
        "$direct" if identified && r < 0.8 => site.app_home,
        "$direct" if r < 0.6 => site.home,
        "$direct" => site.login,
        "https://www.google.com/" | "https://www.bing.com/" | "https://duckduckgo.com/" => {
            if r < 0.4 {
                site.docs(rng)
            } else if r < 0.75 {
                site.blog(rng)
            } else {
                site.home
            }
        }
        "https://github.com/" => site.docs(rng),
        "https://news.ycombinator.com/" | "https://www.reddit.com/" => site.blog(rng),
        _ if r < 0.5 => site.home,
        _ => site.blog(rng),
    }
}

// ------------------------------------------------------------------------------------------
// Rendering

/// The distinct ids and person of a person.
fn anon_id(seed: u64, person: u32, device: &Device, index: u8) -> String {
    uuid7(
        device.anon_ms,
        mix2(seed, 0xA000_0000_0000 | (person as u64) << 4 | index as u64),
    )
    .to_string()
}

fn user_id(seed: u64, person: u32) -> String {
    format!(
        "user-{}",
        short_id(mix2(seed, 0xB000_0000_0000 | person as u64), 10)
    )
}

fn session_id(seed: u64, s: &Session, index: u32) -> String {
    uuid7(s.start_ms, mix2(seed, 0xC000_0000_0000 | index as u64)).to_string()
}

fn window_id(seed: u64, s: &Session, index: u32, window: u8) -> String {
    uuid7(
        s.start_ms + window as i64 * 60_000,
        mix2(seed, 0xD000_0000_0000 | (index as u64) << 2 | window as u64),
    )
    .to_string()
}

fn company_key(seed: u64, c: u32) -> String {
    format!(
        "company-{}",
        short_id(mix2(seed, 0xE000_0000_0000 | c as u64), 6)
    )
}

fn user_agent(d: &Device) -> String {
    let os = OS_NAMES[d.os as usize];
    let v = d.browser_version;
    let platform = match os {
        "Windows" => "Windows NT 10.0; Win64; x64".to_owned(),
        "Mac OS X" => "Macintosh; Intel Mac OS X 10_15_7".to_owned(),
        "Linux" => "X11; Linux x86_64".to_owned(),
        "Chrome OS" => "X11; CrOS x86_64 14541.0.0".to_owned(),
        "iOS" => format!(
            "iPhone; CPU iPhone OS {} like Mac OS X",
            OS_VERSIONS[4][d.os_version as usize].replace('.', "_")
        ),
        _ => format!(
            "Linux; Android {}; K",
            OS_VERSIONS[5][d.os_version as usize]
        ),
    };
    match BROWSER_NAMES[d.browser as usize] {
        "Firefox" => format!("Mozilla/5.0 ({platform}; rv:{v}.0) Gecko/20100101 Firefox/{v}.0"),
        "Safari" | "Mobile Safari" => format!(
            "Mozilla/5.0 ({platform}) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/{v}.0 Safari/605.1.15"
        ),
        _ => format!(
            "Mozilla/5.0 ({platform}) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0 Safari/537.36"
        ),
    }
}

/// One event rendered: the capture object and the Parquet row.
struct Rendered {
    /// The event object as posthog-js puts it in a batch.
    capture: Value,
    row: Row,
}

/// One Parquet row.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    uuid: String,
    event: &'static str,
    distinct_id: String,
    timestamp_us: i64,
    properties: String,
    elements_chain: String,
    session_id: String,
    window_id: String,
    person_id: String,
    group_0: Option<String>,
}

fn iso(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .expect("in range")
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

fn money(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

impl World {
    /// The person a device's anonymous id finally belongs to.
    fn person_of_device(&self, seed: u64, person: u32, device: u8) -> String {
        let p = &self.persons[person as usize];
        let owner = if device == 0 || p.device_merged[device as usize] {
            0
        } else {
            device
        };
        let first = anon_id(seed, person, &p.devices[owner as usize], owner);
        person_uuid(TeamId(1), &first).to_string()
    }

    fn render(&self, cfg: &GenConfig, e: &Ev) -> Rendered {
        let seed = cfg.seed;
        let s = &self.sessions[e.session as usize];
        let p = &self.persons[s.person as usize];
        let d = &p.devices[s.device as usize];
        let page = &self.site.pages[e.page as usize];
        let anon = anon_id(seed, e.person, d, e.device);
        let distinct_id = if e.identified {
            user_id(seed, e.person)
        } else {
            anon.clone()
        };
        let person_id = self.person_of_device(seed, e.person, e.device);
        let (lang, tz, currency) = LANGUAGES[p.lang as usize].0;
        let referrer = REFERRERS[s.referrer as usize].0;
        let first_in_session = e.ts_ms == s.start_ms && e.kind == Kind::Pageview;
        let mut url = format!("https://{}{}", page.host, page.path);
        let campaign = (s.utm > 0 && first_in_session).then(|| CAMPAIGNS[s.utm as usize - 1]);
        if let Some((src, medium, name, _)) = campaign {
            url.push_str(&format!(
                "?utm_source={src}&utm_medium={medium}&utm_campaign={name}"
            ));
        }
        let landing = &self.site.pages[s.landing as usize];
        let sid = session_id(seed, s, e.session);
        let wid = window_id(seed, s, e.session, e.window);
        let r = mix2(seed, 0xF000_0000_0000 | e.ord as u64);
        let (sw, sh) = d.screen;
        let (vw, vh) = match d.device_type {
            0 => (
                sw.saturating_sub((r % 3) as u16 * 16),
                sh.saturating_sub(120 + (r % 5) as u16 * 8),
            ),
            _ => (sw, sh.saturating_sub(100)),
        };
        let mut props = Map::new();
        let mut put = |k: &str, v: Value| {
            props.insert(k.to_owned(), v);
        };
        put("$os", json!(OS_NAMES[d.os as usize]));
        put(
            "$os_version",
            json!(OS_VERSIONS[d.os as usize][d.os_version as usize]),
        );
        put("$browser", json!(BROWSER_NAMES[d.browser as usize]));
        put("$browser_version", json!(d.browser_version));
        put(
            "$device_type",
            json!(DEVICE_TYPE_NAMES[d.device_type as usize]),
        );
        put("$current_url", json!(url));
        put("$host", json!(page.host));
        put("$pathname", json!(page.path));
        put("$raw_user_agent", json!(user_agent(d)));
        put("$browser_language", json!(lang));
        put("$browser_language_prefix", json!(&lang[..2]));
        put("$screen_height", json!(sh));
        put("$screen_width", json!(sw));
        put("$viewport_height", json!(vh));
        put("$viewport_width", json!(vw));
        put("$lib", json!("web"));
        put("$lib_version", json!(LIB_VERSION));
        put("$insert_id", json!(short_id(r, 16)));
        put("$time", json!(e.ts_ms as f64 / 1000.0));
        put("distinct_id", json!(distinct_id));
        put("$device_id", json!(anon));
        put("$timezone", json!(tz));
        put("$referrer", json!(referrer));
        put("$referring_domain", json!(referring_domain(referrer)));
        put("$session_id", json!(sid));
        put("$window_id", json!(wid));
        put(
            "$pageview_id",
            json!(
                uuid7(
                    s.start_ms + e.visit as i64,
                    mix2(seed, (e.session as u64) << 16 | e.visit as u64)
                )
                .to_string()
            ),
        );
        put(
            "$session_entry_url",
            json!(format!("https://{}{}", landing.host, landing.path)),
        );
        put("$configured_session_timeout_ms", json!(1_800_000));
        put("$is_identified", json!(e.identified));
        put("token", json!(cfg.api_key));
        if let Some((src, medium, name, _)) = campaign {
            put("utm_source", json!(src));
            put("utm_medium", json!(medium));
            put("utm_campaign", json!(name));
        }
        let company = p.company.map(|c| company_key(seed, c));
        if e.grouped
            && let Some(key) = &company
        {
            put("$groups", json!({ "company": key }));
        }
        let mut elements_chain = String::new();
        let mut set: Option<Value> = None;
        let mut set_once: Option<Value> = None;
        match e.kind {
            Kind::Pageview => {
                put("title", json!(page.title));
                if e.prev_page != u16::MAX {
                    put(
                        "$prev_pageview_pathname",
                        json!(self.site.pages[e.prev_page as usize].path),
                    );
                }
            }
            Kind::Pageleave => {
                put("$prev_pageview_pathname", json!(page.path));
                put("$prev_pageview_duration", json!(e.extra));
            }
            Kind::Autocapture => {
                let (chain, text) = CHAINS[(e.extra & 0xff) as usize % CHAINS.len()];
                put(
                    "$event_type",
                    json!(EVENT_TYPES[(e.extra >> 8) as usize % EVENT_TYPES.len()]),
                );
                put("$elements_chain", json!(chain));
                if !text.is_empty() {
                    put("$el_text", json!(text));
                }
                put("$ce_version", json!(1));
                elements_chain = chain.to_owned();
            }
            Kind::Identify => {
                put("$anon_distinct_id", json!(anon));
                let name = format!("User {}", short_id(mix2(seed, e.person as u64), 5));
                let domain = match &company {
                    Some(c) => format!("{c}.io"),
                    None => ["gmail.com", "outlook.com", "proton.me", "yahoo.com"]
                        [(r % 4) as usize]
                        .to_owned(),
                };
                let email = format!(
                    "{}@{domain}",
                    user_id(seed, e.person)
                        .trim_start_matches("user-")
                        .to_lowercase()
                );
                set = Some(json!({
                    "email": email,
                    "name": name,
                    "plan": PLAN_NAMES[p.plan as usize],
                }));
                set_once = Some(json!({ "first_seen_browser": BROWSER_NAMES[d.browser as usize] }));
            }
            Kind::SignedUp => {
                put("plan", json!(PLAN_NAMES[p.plan as usize]));
                put(
                    "signup_method",
                    json!(["email", "google", "github"][e.extra as usize % 3]),
                );
            }
            Kind::GroupIdentify => {
                let c = p.company.unwrap_or(0);
                put("$group_type", json!("company"));
                put("$group_key", json!(company_key(seed, c)));
                put(
                    "$group_set",
                    json!({
                        "name": format!("Company {}", short_id(mix2(seed, c as u64 + 7), 4)),
                        "industry": INDUSTRIES[(mix(c as u64) % INDUSTRIES.len() as u64) as usize],
                        "employees": 5 + mix2(seed, c as u64) % 2000,
                    }),
                );
            }
            Kind::AddedToCart => {
                let (name, price) = PRODUCTS[(e.extra & 0xff) as usize % PRODUCTS.len()];
                put("product", json!(name));
                put("price", json!(price));
                put("currency", json!(currency));
            }
            Kind::Purchase => {
                let (name, price) = PRODUCTS[(e.extra & 0xff) as usize % PRODUCTS.len()];
                let qty = (e.extra >> 8).max(1);
                put("product", json!(name));
                put("quantity", json!(qty));
                put("revenue", json!(money(price * qty as f64)));
                put("currency", json!(currency));
                put(
                    "order_id",
                    json!(format!("ord_{}", short_id(mix(r ^ 0x0bd), 12))),
                );
            }
            Kind::FeatureUsed => {
                put(
                    "feature",
                    json!(FEATURES[e.extra as usize % FEATURES.len()]),
                );
            }
            Kind::SurveyShown | Kind::SurveySent | Kind::SurveyDismissed => {
                let survey = (e.extra & 0xf) as usize % SURVEYS.len();
                put(
                    "$survey_id",
                    json!(
                        uuid7(
                            1_700_000_000_000 + survey as i64,
                            mix2(seed, 0x5_0000 + survey as u64)
                        )
                        .to_string()
                    ),
                );
                put("$survey_name", json!(SURVEYS[survey]));
                if e.kind == Kind::SurveySent {
                    let a = e.extra >> 4;
                    let response = match survey {
                        0 => json!((a % 11).max(a % 7 + 4).min(10)),
                        1 => json!(1 + a % 5),
                        _ => json!(SURVEY_TEXTS[a as usize % SURVEY_TEXTS.len()]),
                    };
                    put("$survey_response", response);
                }
            }
        }
        let uuid = uuid7(e.ts_ms, mix2(seed, 0x1_0000_0000_0000 | e.ord as u64)).to_string();
        let mut capture = Map::new();
        capture.insert("uuid".into(), json!(uuid));
        capture.insert("event".into(), json!(e.kind.name()));
        capture.insert("timestamp".into(), json!(iso(e.ts_ms)));
        // What hedgerow (and PostHog) store: top-level $set/$set_once lifted into properties.
        let mut stored = props.clone();
        if let Some(v) = &set {
            stored.insert("$set".into(), v.clone());
            capture.insert("$set".into(), v.clone());
        }
        if let Some(v) = &set_once {
            stored.insert("$set_once".into(), v.clone());
            capture.insert("$set_once".into(), v.clone());
        }
        capture.insert("properties".into(), Value::Object(props));
        let row = Row {
            uuid,
            event: e.kind.name(),
            distinct_id,
            timestamp_us: e.ts_ms * 1000,
            properties: serde_json::to_string(&stored).expect("json"),
            elements_chain,
            session_id: sid,
            window_id: wid,
            person_id,
            group_0: if e.grouped { company } else { None },
        };
        Rendered {
            capture: Value::Object(capture),
            row,
        }
    }
}

// ------------------------------------------------------------------------------------------
// Output

/// The columns of `events.parquet`.
pub fn parquet_schema() -> SchemaRef {
    let s = |n: &str, nullable| Field::new(n, DataType::Utf8, nullable);
    Arc::new(Schema::new(vec![
        s("uuid", false),
        s("event", false),
        s("distinct_id", false),
        Field::new(
            "timestamp",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        s("properties", false),
        s("elements_chain", false),
        s("$session_id", true),
        s("$window_id", true),
        s("person_id", false),
        s("$group_0", true),
    ]))
}

struct RowBuilder {
    uuid: StringBuilder,
    event: StringBuilder,
    distinct_id: StringBuilder,
    timestamp: TimestampMicrosecondBuilder,
    properties: StringBuilder,
    elements_chain: StringBuilder,
    session_id: StringBuilder,
    window_id: StringBuilder,
    person_id: StringBuilder,
    group_0: StringBuilder,
    len: usize,
}

impl RowBuilder {
    fn new() -> Self {
        RowBuilder {
            uuid: StringBuilder::new(),
            event: StringBuilder::new(),
            distinct_id: StringBuilder::new(),
            timestamp: TimestampMicrosecondBuilder::new().with_timezone("UTC"),
            properties: StringBuilder::new(),
            elements_chain: StringBuilder::new(),
            session_id: StringBuilder::new(),
            window_id: StringBuilder::new(),
            person_id: StringBuilder::new(),
            group_0: StringBuilder::new(),
            len: 0,
        }
    }

    fn push(&mut self, r: &Row) {
        self.uuid.append_value(&r.uuid);
        self.event.append_value(r.event);
        self.distinct_id.append_value(&r.distinct_id);
        self.timestamp.append_value(r.timestamp_us);
        self.properties.append_value(&r.properties);
        self.elements_chain.append_value(&r.elements_chain);
        self.session_id.append_value(&r.session_id);
        self.window_id.append_value(&r.window_id);
        self.person_id.append_value(&r.person_id);
        self.group_0.append_option(r.group_0.as_deref());
        self.len += 1;
    }

    fn finish(&mut self) -> RecordBatch {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.uuid.finish()),
            Arc::new(self.event.finish()),
            Arc::new(self.distinct_id.finish()),
            Arc::new(self.timestamp.finish()),
            Arc::new(self.properties.finish()),
            Arc::new(self.elements_chain.finish()),
            Arc::new(self.session_id.finish()),
            Arc::new(self.window_id.finish()),
            Arc::new(self.person_id.finish()),
            Arc::new(self.group_0.finish()),
        ];
        self.len = 0;
        RecordBatch::try_new(parquet_schema(), cols).expect("columns match")
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// Generates the data set into `out` (created if missing).
pub fn generate(cfg: &GenConfig, out: &Path) -> Result<GenSummary, String> {
    if cfg.events == 0 {
        return Err("--events must be at least 1".into());
    }
    if cfg.events > u32::MAX as u64 {
        return Err(format!("--events is at most {}", u32::MAX));
    }
    if cfg.batch_size == 0 {
        return Err("--batch-size must be at least 1".into());
    }
    let (_, w_end) = window(cfg);
    let latest_ok = Utc::now().timestamp_millis() - 49 * 3_600_000;
    if w_end > latest_ok {
        return Err(format!(
            "the window {} + {} days reaches into the last 48 hours; historical_migration needs older events",
            cfg.start, cfg.days
        ));
    }
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    let world = simulate(cfg);
    if let Some(last) = world.events.last()
        && last.ts_ms > latest_ok
    {
        return Err(format!(
            "the busiest persons ran past the window into the last 48 hours ({}); use an earlier --start",
            iso(last.ts_ms)
        ));
    }

    let gz_path = out.join("batches.jsonl.gz");
    let idx_path = out.join("batches.idx");
    let pq_path = out.join("events.parquet");
    let tmp = |p: &PathBuf| p.with_extension("tmp");
    let mut gz = BufWriter::new(File::create(tmp(&gz_path)).map_err(io_err(&gz_path))?);
    let mut idx = BufWriter::new(File::create(tmp(&idx_path)).map_err(io_err(&idx_path))?);
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("level")))
        .set_max_row_group_row_count(Some(128 * 1024))
        .build();
    let pq_file = File::create(tmp(&pq_path)).map_err(io_err(&pq_path))?;
    let mut writer = ArrowWriter::try_new(pq_file, parquet_schema(), Some(props))
        .map_err(|e| format!("{}: {e}", pq_path.display()))?;
    let mut rows = RowBuilder::new();
    let mut offset = 0u64;
    let mut json_bytes = 0u64;
    let mut batches = 0u64;
    let mut counts = vec![0u64; KINDS.len()];
    // Events per person under its identified id and under its first device's anonymous id.
    let mut by_user: Vec<u64> = vec![0; world.persons.len()];
    let mut by_anon: Vec<u64> = vec![0; world.persons.len()];
    for chunk in world.events.chunks(cfg.batch_size) {
        let mut batch = Vec::with_capacity(chunk.len());
        for e in chunk {
            let r = world.render(cfg, e);
            counts[KINDS.iter().position(|k| *k == e.kind).expect("kind")] += 1;
            if e.identified {
                by_user[e.person as usize] += 1;
            } else if e.device == 0 {
                by_anon[e.person as usize] += 1;
            }
            rows.push(&r.row);
            if rows.len >= 64 * 1024 {
                writer
                    .write(&rows.finish())
                    .map_err(|e| format!("{}: {e}", pq_path.display()))?;
            }
            batch.push(r.capture);
        }
        let mut body = serde_json::to_vec(&json!({
            "api_key": cfg.api_key,
            "historical_migration": true,
            "batch": batch,
        }))
        .expect("json");
        body.push(b'\n');
        json_bytes += body.len() as u64;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&body).map_err(io_err(&gz_path))?;
        let member = enc.finish().map_err(io_err(&gz_path))?;
        gz.write_all(&member).map_err(io_err(&gz_path))?;
        writeln!(idx, "{offset}\t{}\t{}", member.len(), chunk.len()).map_err(io_err(&idx_path))?;
        offset += member.len() as u64;
        batches += 1;
    }
    if rows.len > 0 {
        writer
            .write(&rows.finish())
            .map_err(|e| format!("{}: {e}", pq_path.display()))?;
    }
    writer
        .close()
        .map_err(|e| format!("{}: {e}", pq_path.display()))?;
    gz.flush().map_err(io_err(&gz_path))?;
    idx.flush().map_err(io_err(&idx_path))?;
    drop((gz, idx));
    for p in [&gz_path, &idx_path, &pq_path] {
        std::fs::rename(tmp(p), p).map_err(io_err(p))?;
    }
    // The distinct_id with the most events: a stable point-lookup target.
    let busiest = |counts: &[u64]| {
        (0..counts.len())
            .max_by(|a, b| counts[*a].cmp(&counts[*b]).then(b.cmp(a)))
            .unwrap_or(0)
    };
    let (u, a) = (busiest(&by_user), busiest(&by_anon));
    let top_distinct_id = if by_user[u] >= by_anon[a] {
        user_id(cfg.seed, u as u32)
    } else {
        anon_id(cfg.seed, a as u32, &world.persons[a].devices[0], 0)
    };
    let summary = GenSummary {
        events: world.events.len() as u64,
        persons: world.persons.len() as u64,
        sessions: world.sessions.len() as u64,
        batches,
        json_bytes,
        gzip_bytes: offset,
        first_timestamp: world
            .events
            .first()
            .map(|e| iso(e.ts_ms))
            .unwrap_or_default(),
        last_timestamp: world
            .events
            .last()
            .map(|e| iso(e.ts_ms))
            .unwrap_or_default(),
        event_counts: KINDS
            .iter()
            .zip(&counts)
            .map(|(k, c)| (k.name().to_owned(), *c))
            .collect(),
        top_distinct_id,
    };
    let manifest = json!({
        "generator": "hedgerow gen",
        "version": 2,
        "events": cfg.events,
        "seed": cfg.seed,
        "start": cfg.start.to_string(),
        "days": cfg.days,
        "api_key": cfg.api_key,
        "batch_size": cfg.batch_size,
        "companies": world.n_companies,
        "summary": summary,
    });
    let man_path = out.join("manifest.json");
    std::fs::write(
        &man_path,
        serde_json::to_vec_pretty(&manifest).expect("json"),
    )
    .map_err(io_err(&man_path))?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
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
}
