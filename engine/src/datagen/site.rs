//! The site the simulated people visit: hosts, pages, blog posts, docs and insights.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Area {
    Marketing,
    Blog,
    Docs,
    App,
    Shop,
}

pub(super) struct Page {
    pub(super) host: &'static str,
    pub(super) path: String,
    pub(super) title: String,
    pub(super) area: Area,
}

pub(super) const HOST_WWW: &str = "example.com";
pub(super) const HOST_APP: &str = "app.example.com";
pub(super) const HOST_DOCS: &str = "docs.example.com";

pub(super) const BLOG_SLUGS: &[&str] = &[
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
pub(super) const DOC_SECTIONS: &[&str] = &[
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
pub(super) const N_INSIGHTS: usize = 150;

/// Page indexes of fixed pages, for the simulation's rules.
pub(super) struct Site {
    pub(super) pages: Vec<Page>,
    pub(super) home: u16,
    pub(super) pricing: u16,
    pub(super) signup: u16,
    pub(super) login: u16,
    pub(super) checkout: u16,
    pub(super) checkout_done: u16,
    pub(super) app_home: u16,
    pub(super) marketing: Vec<u16>,
    pub(super) marketing_w: Weighted,
    pub(super) blog: Vec<u16>,
    pub(super) blog_w: Weighted,
    pub(super) docs: Vec<u16>,
    pub(super) docs_w: Weighted,
    pub(super) app: Vec<u16>,
    pub(super) app_w: Weighted,
}

impl Site {
    pub(super) fn new(seed: u64) -> Self {
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

    pub(super) fn marketing(&self, rng: &mut StdRng) -> u16 {
        self.marketing[self.marketing_w.pick(rng.random())]
    }
    pub(super) fn blog(&self, rng: &mut StdRng) -> u16 {
        self.blog[self.blog_w.pick(rng.random())]
    }
    pub(super) fn docs(&self, rng: &mut StdRng) -> u16 {
        self.docs[self.docs_w.pick(rng.random())]
    }
    pub(super) fn app(&self, rng: &mut StdRng) -> u16 {
        self.app[self.app_w.pick(rng.random())]
    }

    /// The next page of a visitor on `cur`.
    pub(super) fn next(&self, rng: &mut StdRng, cur: u16, identified: bool) -> u16 {
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

pub(super) fn short_id(seed: u64, len: usize) -> String {
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
