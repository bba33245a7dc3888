//! Rendering: each simulated event as posthog-js sends it, and as the row hedgerow stores.

use super::*;

/// The distinct ids and person of a person.
pub(super) fn anon_id(seed: u64, person: u32, device: &Device, index: u8) -> String {
    uuid7(
        device.anon_ms,
        mix2(seed, 0xA000_0000_0000 | (person as u64) << 4 | index as u64),
    )
    .to_string()
}

pub(super) fn user_id(seed: u64, person: u32) -> String {
    format!(
        "user-{}",
        short_id(mix2(seed, 0xB000_0000_0000 | person as u64), 10)
    )
}

pub(super) fn session_id(seed: u64, s: &Session, index: u32) -> String {
    uuid7(s.start_ms, mix2(seed, 0xC000_0000_0000 | index as u64)).to_string()
}

pub(super) fn window_id(seed: u64, s: &Session, index: u32, window: u8) -> String {
    uuid7(
        s.start_ms + window as i64 * 60_000,
        mix2(seed, 0xD000_0000_0000 | (index as u64) << 2 | window as u64),
    )
    .to_string()
}

pub(super) fn company_key(seed: u64, c: u32) -> String {
    format!(
        "company-{}",
        short_id(mix2(seed, 0xE000_0000_0000 | c as u64), 6)
    )
}

pub(super) fn user_agent(d: &Device) -> String {
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
pub(super) struct Rendered {
    /// The event object as posthog-js puts it in a batch.
    pub(super) capture: Value,
    pub(super) row: Row,
}

/// One Parquet row.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Row {
    pub(super) uuid: String,
    pub(super) event: &'static str,
    pub(super) distinct_id: String,
    pub(super) timestamp_us: i64,
    pub(super) properties: String,
    pub(super) elements_chain: String,
    pub(super) session_id: String,
    pub(super) window_id: String,
    pub(super) person_id: String,
    pub(super) group_0: Option<String>,
}

pub(super) fn iso(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .expect("in range")
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

pub(super) fn money(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

impl World {
    /// The person a device's anonymous id finally belongs to.
    pub(super) fn person_of_device(&self, seed: u64, person: u32, device: u8) -> String {
        let p = &self.persons[person as usize];
        let owner = if device == 0 || p.device_merged[device as usize] {
            0
        } else {
            device
        };
        let first = anon_id(seed, person, &p.devices[owner as usize], owner);
        person_uuid(TeamId(1), &first).to_string()
    }

    pub(super) fn render(&self, cfg: &GenConfig, e: &Ev) -> Rendered {
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
