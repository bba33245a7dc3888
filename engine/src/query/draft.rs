//! Draft SQL: a starting HogQL query for a plain-language prompt, made from the project's
//! own event names and property keys.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Modifiers, QueryError, QueryService};
use crate::meta::Project;

impl QueryService {
    /// A draft HogQL query for a plain-language `prompt`, built from the project's own event
    /// names and property keys: the prompt's words are matched against them (an event named
    /// in the prompt becomes the filter, "by `<property>`" a breakdown, "per day/week/month" a
    /// time bucket, "users" a unique-person count); an empty prompt drafts the daily trend of
    /// the project's most frequent event. A starting point to edit, not an answer.
    pub async fn draft_sql(
        self: &Arc<Self>,
        project: &Project,
        prompt: &str,
    ) -> Result<String, QueryError> {
        let cancel = CancellationToken::new();
        let none = HashMap::new();
        let events = self
            .run_hogql(
                project,
                "SELECT event, count() AS c FROM events GROUP BY event ORDER BY c DESC LIMIT 200",
                &none,
                Modifiers::default(),
                &cancel,
            )
            .await?;
        let names: Vec<String> = events
            .results
            .iter()
            .filter_map(|r| r.get(0).and_then(Value::as_str).map(str::to_string))
            .collect();
        let sample = self
            .run_hogql(
                project,
                "SELECT properties FROM events ORDER BY timestamp DESC LIMIT 500",
                &none,
                Modifiers::default(),
                &cancel,
            )
            .await?;
        let mut keys: Vec<String> = Vec::new();
        for r in &sample.results {
            if let Some(Value::Object(m)) = r
                .get(0)
                .and_then(Value::as_str)
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
            {
                for k in m.keys() {
                    if !keys.contains(k) {
                        keys.push(k.clone());
                    }
                }
            }
        }
        Ok(draft_from(prompt, &names, &keys))
    }
}

fn normalize_word(s: &str) -> String {
    s.trim_start_matches('$')
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The draft for `prompt` given the project's event names and property keys.
pub fn draft_from(prompt: &str, events: &[String], keys: &[String]) -> String {
    let p = normalize_word(prompt);
    let words: Vec<&str> = p.split(' ').collect();
    let mentions = |name: &str| {
        let n = normalize_word(name);
        !n.is_empty()
            && (format!(" {p} ").contains(&format!(" {n} "))
                || (n == "pageview" && p.contains("page view")))
    };
    let quote = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"));
    // No prompt: the daily trend of the project's most frequent event.
    let no_prompt = p.is_empty();
    let event = match no_prompt {
        true => events.first(),
        false => events.iter().find(|e| mentions(e)),
    };
    let breakdown = words
        .windows(2)
        .filter(|w| w[0] == "by" || w[0] == "per")
        .find_map(|w| {
            keys.iter()
                .find(|k| normalize_word(k).split(' ').next_back() == Some(w[1]))
        });
    let bucket = if p.contains("per hour") || p.contains("hourly") {
        Some("toStartOfHour(timestamp)")
    } else if p.contains("per week") || p.contains("weekly") {
        Some("toStartOfWeek(timestamp)")
    } else if p.contains("per month") || p.contains("monthly") {
        Some("toStartOfMonth(timestamp)")
    } else if no_prompt
        || p.contains("per day")
        || p.contains("daily")
        || p.contains("over time")
        || p.contains("trend")
    {
        Some("toStartOfDay(timestamp)")
    } else {
        None
    };
    let measure = if words
        .iter()
        .any(|w| matches!(*w, "users" | "people" | "persons" | "visitors" | "unique"))
    {
        "count(DISTINCT person_id) AS users"
    } else {
        "count() AS events"
    };
    let mut select = Vec::new();
    let mut group = Vec::new();
    if let Some(b) = bucket {
        select.push(format!("{b} AS period"));
        group.push("period".to_string());
    }
    if let Some(k) = breakdown {
        let field = if k
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        {
            format!("properties.{k}")
        } else {
            format!("properties[{}]", quote(k))
        };
        select.push(format!("{field} AS breakdown"));
        group.push("breakdown".to_string());
    }
    if event.is_none() && bucket.is_none() && breakdown.is_none() {
        select.push("event".to_string());
        group.push("event".to_string());
    }
    select.push(measure.to_string());
    let mut sql = format!(
        "SELECT {}\nFROM events\nWHERE timestamp > now() - INTERVAL 30 DAY",
        select.join(", ")
    );
    if let Some(e) = event {
        sql.push_str(&format!("\n  AND event = {}", quote(e)));
    }
    if !group.is_empty() {
        sql.push_str(&format!("\nGROUP BY {}", group.join(", ")));
    }
    let order = if bucket.is_some() {
        "period".to_string()
    } else {
        measure.rsplit(' ').next().unwrap_or("1").to_string() + " DESC"
    };
    sql.push_str(&format!("\nORDER BY {order}\nLIMIT 100"));
    sql
}

#[cfg(test)]
mod draft_tests {
    use super::draft_from;

    #[test]
    fn drafts_use_the_projects_names() {
        let events = vec!["$pageview".to_string(), "signed up".to_string()];
        let keys = vec!["$browser".to_string(), "plan".to_string()];
        let d = draft_from("daily users who signed up by plan", &events, &keys);
        assert!(d.contains("toStartOfDay(timestamp) AS period"), "{d}");
        assert!(d.contains("AND event = 'signed up'"), "{d}");
        assert!(d.contains("properties.plan AS breakdown"), "{d}");
        assert!(d.contains("count(DISTINCT person_id)"), "{d}");
        let d = draft_from("pageviews by browser", &events, &keys);
        assert!(d.contains("properties.$browser AS breakdown"), "{d}");
        let d = draft_from("what happened", &events, &keys);
        assert!(d.contains("SELECT event, count() AS events"), "{d}");
        // Without a prompt: the most frequent event (listed first) per day.
        let d = draft_from(" ", &events, &keys);
        assert!(d.contains("toStartOfDay(timestamp) AS period"), "{d}");
        assert!(d.contains("AND event = '$pageview'"), "{d}");
        let d = draft_from("", &[], &keys);
        assert!(
            d.starts_with("SELECT toStartOfDay(timestamp) AS period, count()"),
            "{d}"
        );
    }
}
