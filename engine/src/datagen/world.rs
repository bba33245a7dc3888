//! Devices, people and sessions: the simulation of who does what, when.

use super::*;

pub(super) const DEVICE_TYPES: &[(u8, f64)] = &[(0, 0.60), (1, 0.36), (2, 0.04)];
pub(super) const DEVICE_TYPE_NAMES: &[&str] = &["Desktop", "Mobile", "Tablet"];
pub(super) const OS_NAMES: &[&str] = &[
    "Windows",
    "Mac OS X",
    "Linux",
    "Chrome OS",
    "iOS",
    "Android",
];
pub(super) const OS_VERSIONS: &[&[&str]] = &[
    &["10", "11"],
    &["14.6.1", "15.3.2", "13.6.9"],
    &["6.8", "6.11"],
    &["14541.0.0"],
    &["17.6.1", "18.3.2", "18.5"],
    &["14", "15", "13"],
];
pub(super) const BROWSER_NAMES: &[&str] = &[
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
pub(super) const BROWSER_VERSIONS: &[&[u32]] = &[
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

pub(super) fn os_for(rng: &mut StdRng, device_type: u8) -> u8 {
    match device_type {
        0 => pick(rng, &[(0, 0.55), (1, 0.33), (2, 0.08), (3, 0.04)]),
        1 => pick(rng, &[(4, 0.52), (5, 0.48)]),
        _ => pick(rng, &[(4, 0.65), (5, 0.35)]),
    }
}

pub(super) fn browser_for(rng: &mut StdRng, os: u8) -> u8 {
    match os {
        0 => pick(rng, &[(0, 0.68), (3, 0.20), (2, 0.09), (4, 0.03)]),
        1 => pick(rng, &[(0, 0.55), (1, 0.35), (2, 0.07), (3, 0.03)]),
        2 => pick(rng, &[(0, 0.6), (2, 0.4)]),
        3 => 0,
        4 => pick(rng, &[(5, 0.82), (6, 0.14), (7, 0.04)]),
        _ => pick(rng, &[(0, 0.78), (8, 0.17), (2, 0.05)]),
    }
}

pub(super) const SCREENS: &[&[((u16, u16), f64)]] = &[
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

pub(super) const LANGUAGES: &[((&str, &str, &str), f64)] = &[
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
pub(super) struct Device {
    pub(super) device_type: u8,
    pub(super) os: u8,
    pub(super) os_version: u8,
    pub(super) browser: u8,
    pub(super) browser_version: u32,
    pub(super) screen: (u16, u16),
    /// When the device's anonymous id was made (its first event).
    pub(super) anon_ms: i64,
}

impl Device {
    pub(super) fn new(rng: &mut StdRng) -> Self {
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

pub(super) struct Person {
    pub(super) devices: Vec<Device>,
    pub(super) lang: u8,
    /// Set when the person signs up; the plan chosen.
    pub(super) plan: u8,
    pub(super) company: Option<u32>,
    /// Per device: did its anonymous id ever `$identify` into the person?
    pub(super) device_merged: Vec<bool>,
    pub(super) identified: bool,
    /// Has sent `$groupidentify` (its events carry `$groups` from then on).
    pub(super) grouped: bool,
}

pub(super) const PLANS: &[(u8, f64)] = &[(0, 0.70), (1, 0.22), (2, 0.08)];
pub(super) const PLAN_NAMES: &[&str] = &["free", "pro", "team"];
pub(super) const INDUSTRIES: &[&str] = &[
    "saas",
    "ecommerce",
    "fintech",
    "media",
    "health",
    "education",
];
pub(super) const FEATURES: &[&str] = &[
    "dashboards",
    "insights",
    "funnels",
    "retention",
    "session_replay",
    "feature_flags",
    "exports",
    "sql_editor",
];
pub(super) const PRODUCTS: &[(&str, f64)] = &[
    ("Starter plan", 29.0),
    ("Pro plan", 99.0),
    ("Team plan", 249.0),
    ("Extra seats", 12.5),
    ("Hoodie", 54.99),
];
pub(super) const SURVEYS: &[&str] = &["NPS Q1", "Onboarding CSAT", "What is missing?"];
pub(super) const SURVEY_TEXTS: &[&str] = &[
    "Faster dashboards please",
    "More integrations",
    "Love it",
    "Better docs for the API",
    "Dark mode",
    "Cheaper plans for startups",
];
pub(super) const EVENT_TYPES: &[&str] = &["click", "click", "click", "click", "submit", "change"];

/// Autocapture element chains (PostHog's `elements_chain` text), with the element text.
pub(super) const CHAINS: &[(&str, &str)] = &[
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
pub(super) const REFERRERS: &[(&str, f64)] = &[
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
pub(super) const CAMPAIGNS: &[(&str, &str, &str, u8)] = &[
    ("google", "cpc", "brand-search", 1),
    ("google", "cpc", "competitor-keywords", 1),
    ("newsletter", "email", "weekly-digest", 0),
    ("newsletter", "email", "product-update", 0),
    ("twitter", "social", "launch-week", 5),
    ("linkedin", "paid_social", "b2b-q1", 6),
    ("facebook", "paid_social", "retargeting", 9),
];

pub(super) fn referring_domain(referrer: &str) -> &str {
    if referrer == "$direct" {
        return referrer;
    }
    referrer
        .trim_start_matches("https://")
        .trim_end_matches('/')
}

pub(super) struct Session {
    pub(super) start_ms: i64,
    pub(super) person: u32,
    pub(super) device: u8,
    pub(super) referrer: u8,
    /// 0: none, else 1 + index into [`CAMPAIGNS`].
    pub(super) utm: u8,
    pub(super) landing: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Kind {
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

pub(super) const KINDS: &[Kind] = &[
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
    pub(super) fn name(self) -> &'static str {
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
pub(super) struct Ev {
    pub(super) ts_ms: i64,
    /// Generation order: a tie-break for equal timestamps and the event's random stream.
    pub(super) ord: u32,
    pub(super) person: u32,
    pub(super) session: u32,
    pub(super) kind: Kind,
    pub(super) page: u16,
    /// The page before (pageview) or the page left (pageleave); `u16::MAX` when none.
    pub(super) prev_page: u16,
    /// Page visit number within the session (for `$pageview_id`).
    pub(super) visit: u16,
    pub(super) device: u8,
    /// Sent with the identified distinct_id (else the device's anonymous id).
    pub(super) identified: bool,
    /// Whether the person's company is in `$groups`.
    pub(super) grouped: bool,
    pub(super) window: u8,
    /// Kind-specific: seconds on page (pageleave), element chain index (autocapture),
    /// product (cart, purchase), feature, survey.
    pub(super) extra: u32,
}

pub(super) struct World {
    pub(super) site: Site,
    pub(super) persons: Vec<Person>,
    pub(super) sessions: Vec<Session>,
    pub(super) events: Vec<Ev>,
    pub(super) n_companies: u32,
}

pub(super) fn window(cfg: &GenConfig) -> (i64, i64) {
    let start = cfg
        .start
        .and_hms_opt(0, 0, 0)
        .expect("midnight")
        .and_utc()
        .timestamp_millis();
    (start, start + cfg.days.max(1) as i64 * 86_400_000)
}

/// Runs the whole simulation; events come out sorted by (timestamp, generation order).
pub(super) fn simulate(cfg: &GenConfig) -> World {
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
pub(super) fn session_page_start(events: &[Ev], page: u16) -> i64 {
    events
        .iter()
        .rev()
        .take(100)
        .find(|e| e.kind == Kind::Pageview && e.page == page)
        .map_or(0, |e| e.ts_ms)
}

pub(super) struct SessionState {
    pub(super) t: i64,
    pub(super) page: u16,
    pub(super) visit: u16,
    pub(super) identified: bool,
    pub(super) session: u32,
    pub(super) person: u32,
    pub(super) device: u8,
    pub(super) window: u8,
    pub(super) cart: bool,
}

pub(super) fn landing_page(
    site: &Site,
    rng: &mut StdRng,
    referrer: u8,
    utm: u8,
    identified: bool,
) -> u16 {
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
