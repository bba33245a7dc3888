//! The persons list's filters (`distinct_id`, `email`, `search`, person-property filters)
//! and the SQL they become: a WHERE clause over `persons p` with its parameters, and the
//! SQLite functions it calls (`hr_prop`, `hr_regex`, `hr_icontains`).

use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;
use serde_json::Value;

use super::{Result, StoreError};
use crate::model::{DistinctId, TeamId};

/// A person-property filter of the persons list (`{key, value, operator, type}`).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct PropertyFilter {
    pub key: String,
    #[serde(default)]
    pub value: Value,
    #[serde(default = "default_operator")]
    pub operator: String,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
}

fn default_operator() -> String {
    "exact".into()
}

/// What the persons list is filtered by; every part given must match.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PersonFilter {
    pub distinct_id: Option<DistinctId>,
    pub email: Option<String>,
    pub search: Option<String>,
    pub properties: Vec<PropertyFilter>,
}

/// A property's value as PostHog's filters read it: strings as they are, other scalars as
/// JSON text, JSON null as absent.
fn property_text(props: &str, key: &str) -> Option<String> {
    let v: Value = serde_json::from_str(props).ok()?;
    match v.get(key)? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// Registers the functions the filter SQL calls on a connection.
pub(super) fn register_functions(conn: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("hr_prop", 2, flags, |ctx| {
        let props: Option<String> = ctx.get(0)?;
        let key: String = ctx.get(1)?;
        Ok(props.and_then(|p| property_text(&p, &key)))
    })?;
    conn.create_scalar_function("hr_regex", 2, flags, |ctx| {
        let text: Option<String> = ctx.get(0)?;
        let pattern: String = ctx.get(1)?;
        let re = regex::Regex::new(&pattern)
            .map_err(|e| rusqlite::Error::UserFunctionError(Box::new(e)))?;
        Ok(text.map(|t| re.is_match(&t)))
    })?;
    conn.create_scalar_function("hr_icontains", 2, flags, |ctx| {
        let text: Option<String> = ctx.get(0)?;
        let needle: String = ctx.get(1)?;
        Ok(text.map(|t| t.to_lowercase().contains(&needle.to_lowercase())))
    })?;
    Ok(())
}

fn json_path(key: &str) -> Result<String> {
    if key.contains('"') {
        return Err(StoreError::Invalid(format!(
            "property filter key {key:?} contains a double quote, which is not supported"
        )));
    }
    Ok(format!("$.\"{key}\""))
}

/// The WHERE clause (over `persons p`) and its parameters for a persons filter.
pub(super) fn filter_sql(
    team: TeamId,
    f: &PersonFilter,
) -> Result<(String, Vec<rusqlite::types::Value>)> {
    use rusqlite::types::Value as V;
    let mut sql = String::from("p.team_id = ?");
    let mut args = vec![V::Integer(team.0)];
    if let Some(d) = &f.distinct_id {
        sql.push_str(" AND EXISTS (SELECT 1 FROM person_distinct_ids d WHERE d.team_id = p.team_id AND d.person_id = p.id AND d.distinct_id = ?)");
        args.push(V::Text(d.as_str().to_owned()));
    }
    if let Some(e) = &f.email {
        sql.push_str(" AND hr_prop(p.properties, 'email') = ?");
        args.push(V::Text(e.clone()));
    }
    if let Some(s) = f.search.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        sql.push_str(" AND (hr_icontains(hr_prop(p.properties, 'email'), ?) OR p.uuid = ? OR EXISTS (SELECT 1 FROM person_distinct_ids d WHERE d.team_id = p.team_id AND d.person_id = p.id AND d.distinct_id = ?))");
        args.push(V::Text(s.to_owned()));
        args.push(V::Text(s.to_lowercase()));
        args.push(V::Text(s.to_owned()));
    }
    for pf in &f.properties {
        if let Some(k) = pf.kind.as_deref()
            && k != "person"
        {
            return Err(StoreError::Invalid(format!(
                "property filter type {k:?} is not supported here; persons are filtered by type \"person\""
            )));
        }
        json_path(&pf.key)?;
        let prop = "hr_prop(p.properties, ?)";
        args.push(V::Text(pf.key.clone()));
        let values: Vec<String> = match &pf.value {
            Value::Array(a) => a.iter().filter_map(value_text).collect(),
            v => value_text(v).into_iter().collect(),
        };
        let one = |args: &mut Vec<V>| -> Result<()> {
            let v = values.first().cloned().ok_or_else(|| {
                StoreError::Invalid(format!(
                    "property filter on {:?} with operator {} needs a value",
                    pf.key, pf.operator
                ))
            })?;
            args.push(V::Text(v));
            Ok(())
        };
        let num = |args: &mut Vec<V>| -> Result<()> {
            let v = values
                .first()
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| {
                    StoreError::Invalid(format!(
                        "property filter on {:?} with operator {} needs a numeric value",
                        pf.key, pf.operator
                    ))
                })?;
            args.push(V::Real(v));
            Ok(())
        };
        let placeholders = |n: usize| vec!["?"; n].join(", ");
        let clause = match pf.operator.as_str() {
            "exact" => {
                if values.is_empty() {
                    return Err(StoreError::Invalid(format!(
                        "property filter on {:?} needs a value",
                        pf.key
                    )));
                }
                let c = format!("{prop} IN ({})", placeholders(values.len()));
                args.extend(values.iter().cloned().map(V::Text));
                c
            }
            "is_not" => {
                if values.is_empty() {
                    return Err(StoreError::Invalid(format!(
                        "property filter on {:?} needs a value",
                        pf.key
                    )));
                }
                let c = format!(
                    "coalesce({prop} NOT IN ({}), 1)",
                    placeholders(values.len())
                );
                args.extend(values.iter().cloned().map(V::Text));
                c
            }
            "icontains" => {
                one(&mut args)?;
                format!("coalesce(hr_icontains({prop}, ?), 0)")
            }
            "not_icontains" => {
                one(&mut args)?;
                format!("coalesce(NOT hr_icontains({prop}, ?), 1)")
            }
            "regex" | "not_regex" => {
                let v = values.first().cloned().unwrap_or_default();
                if let Err(source) = regex::Regex::new(&v) {
                    return Err(StoreError::BadRegex {
                        key: pf.key.clone(),
                        source,
                    });
                }
                args.push(V::Text(v));
                if pf.operator == "regex" {
                    format!("coalesce(hr_regex({prop}, ?), 0)")
                } else {
                    format!("coalesce(NOT hr_regex({prop}, ?), 1)")
                }
            }
            op @ ("gt" | "lt" | "gte" | "lte") => {
                num(&mut args)?;
                let sym = match op {
                    "gt" => ">",
                    "lt" => "<",
                    "gte" => ">=",
                    _ => "<=",
                };
                format!("CAST({prop} AS REAL) {sym} ?")
            }
            "is_set" => format!("{prop} IS NOT NULL"),
            "is_not_set" => format!("{prop} IS NULL"),
            other => {
                return Err(StoreError::Invalid(format!(
                    "property filter operator {other:?} is not supported; use exact, is_not, icontains, not_icontains, regex, not_regex, gt, gte, lt, lte, is_set or is_not_set"
                )));
            }
        };
        sql.push_str(" AND ");
        sql.push_str(&clause);
    }
    Ok((sql, args))
}
