//! Person-id overrides at query time: after a merge, events stored under the merged-away
//! person answer with the person they went into.
//!
//! `hogql_person_override(person_id)` maps each id through the project's override map (old
//! → current, chains already followed by the store). The planner wraps `events.person_id` in
//! it when the project has overrides and the query's persons mode applies them; a query that
//! does not read `person_id` never evaluates it (the projection is pruned).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::storage::ids;
use datafusion::arrow::array::{Array, ArrayRef, FixedSizeBinaryArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result as DFResult;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// A project's overrides, old person id → current person id, in 16 bytes. Hashed with
/// foldhash (seeded per process): every `person_id` a query reads is looked up, and SipHash
/// made that a third of a daily active users query's CPU at 2M events.
#[derive(Debug, Default)]
pub struct OverrideMap {
    /// Distinguishes maps for plan equality (the store's version when it was read).
    pub version: u64,
    pub map: HashMap<[u8; 16], [u8; 16], foldhash::fast::RandomState>,
}

impl OverrideMap {
    /// The map from the store's text ids (pairs that are not UUIDs cannot match an event).
    pub fn from_text(version: u64, map: &HashMap<String, String>) -> Self {
        let map = map
            .iter()
            .filter_map(|(k, v)| Some((ids::parse(k)?, ids::parse(v)?)))
            .collect();
        OverrideMap { version, map }
    }
}

/// How `person_id` and `person.properties` of events are read (PostHog's
/// `personsOnEventsMode` modifier): read from the request by `hedgerow-query-request`.
pub use hedgerow_query_request::PersonsMode;

#[derive(Debug)]
struct OverrideUdf {
    signature: Signature,
    map: Arc<OverrideMap>,
}

impl PartialEq for OverrideUdf {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.map, &other.map) || self.map.version == other.map.version
    }
}
impl Eq for OverrideUdf {}
impl Hash for OverrideUdf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.map.version.hash(state);
    }
}

/// `person_id` (16 bytes, or text from a table written before 16-byte ids) read through the
/// overrides, as 16 bytes.
pub fn override_person_id(person_id: Expr, map: Arc<OverrideMap>) -> Expr {
    Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(
        Arc::new(ScalarUDF::new_from_impl(OverrideUdf {
            signature: Signature::any(1, Volatility::Immutable),
            map,
        })),
        vec![person_id],
    ))
}

impl ScalarUDFImpl for OverrideUdf {
    fn name(&self) -> &str {
        "hogql_person_override"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> DFResult<DataType> {
        Ok(ids::UUID_TYPE)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        let col = args.args[0].to_array(args.number_rows)?;
        let ids = ids::to_uuid(col.as_ref())?;
        let map = &self.map.map;
        // The ids back to back (a slot under NULL holds some 16 bytes too: mapping them
        // changes nothing, the null buffer stays). Compared as u128s: a slice comparison
        // was a call to memcmp per row.
        let data = ids.value_data();
        let key = |i: usize| -> [u8; 16] {
            data[i * 16..i * 16 + 16]
                .try_into()
                .expect("16-byte values")
        };
        // Rows are sorted by person within an event, so an id mostly repeats the one
        // before: look each run up once.
        let mut first_hit = None;
        let mut prev: Option<u128> = None;
        for i in 0..ids.len() {
            let k = key(i);
            let bits = u128::from_ne_bytes(k);
            if prev == Some(bits) {
                continue;
            }
            prev = Some(bits);
            if map.contains_key(&k) {
                first_hit = Some(i);
                break;
            }
        }
        // Most batches hold no merged person: hand the column back as it is then.
        let Some(first_hit) = first_hit else {
            return Ok(ColumnarValue::Array(Arc::new(ids) as ArrayRef));
        };
        // Copy the ids, then write each merged run's new id over it.
        let mut bytes = data.to_vec();
        let mut prev: Option<(u128, Option<&[u8; 16]>)> = None;
        for i in first_hit..ids.len() {
            let k = key(i);
            let bits = u128::from_ne_bytes(k);
            let to = match prev {
                Some((p, to)) if p == bits => to,
                _ => {
                    let to = map.get(&k);
                    prev = Some((bits, to));
                    to
                }
            };
            if let Some(to) = to {
                bytes[i * 16..i * 16 + 16].copy_from_slice(to);
            }
        }
        let out = FixedSizeBinaryArray::new(16, bytes.into(), ids.nulls().cloned());
        Ok(ColumnarValue::Array(Arc::new(out) as ArrayRef))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{AsArray, StringArray};
    use datafusion::arrow::datatypes::Field;
    use datafusion::config::ConfigOptions;

    #[test]
    fn maps_only_overridden_ids() {
        const OLD: &str = "018cc2ea-2d9c-75d3-9f6b-97091fc715c6";
        const NEW: &str = "018cc2ea-2d9c-75d3-9f6b-000000000001";
        const OTHER: &str = "018cc2ea-2d9c-75d3-9f6b-000000000002";
        let map = Arc::new(OverrideMap::from_text(
            1,
            &HashMap::from([(OLD.to_string(), NEW.to_string())]),
        ));
        let udf = OverrideUdf {
            signature: Signature::any(1, Volatility::Immutable),
            map,
        };
        let run = |vals: Vec<Option<&str>>| {
            let n = vals.len();
            // Text in, as a table written before 16-byte ids holds it.
            let arr: ArrayRef = Arc::new(StringArray::from(vals));
            let out = udf
                .invoke_with_args(ScalarFunctionArgs {
                    args: vec![ColumnarValue::Array(arr)],
                    arg_fields: vec![Arc::new(Field::new("p", DataType::Utf8, true))],
                    number_rows: n,
                    return_field: Arc::new(Field::new("p", ids::UUID_TYPE, true)),
                    config_options: Arc::new(ConfigOptions::default()),
                })
                .unwrap();
            let ColumnarValue::Array(a) = out else {
                panic!()
            };
            let text = ids::to_text(a.as_ref()).unwrap();
            text.as_string::<i32>()
                .iter()
                .map(|v| v.map(str::to_owned))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            run(vec![Some(OTHER), None, Some(OLD)]),
            vec![Some(OTHER.to_string()), None, Some(NEW.to_string())]
        );
        assert_eq!(run(vec![Some(OTHER)]), vec![Some(OTHER.to_string())]);
        // Runs, NULLs between them, and a column sliced from a longer one (16 bytes in).
        let col = ids::to_uuid(&StringArray::from(vec![
            Some(OLD),
            Some(OTHER),
            Some(OLD),
            Some(OLD),
            None,
            Some(OLD),
            Some(OTHER),
        ]))
        .unwrap()
        .slice(1, 6);
        let out = udf
            .invoke_with_args(ScalarFunctionArgs {
                args: vec![ColumnarValue::Array(Arc::new(col))],
                arg_fields: vec![Arc::new(Field::new("p", ids::UUID_TYPE, true))],
                number_rows: 6,
                return_field: Arc::new(Field::new("p", ids::UUID_TYPE, true)),
                config_options: Arc::new(ConfigOptions::default()),
            })
            .unwrap();
        let ColumnarValue::Array(a) = out else {
            panic!()
        };
        let text = ids::to_text(a.as_ref()).unwrap();
        let got: Vec<Option<&str>> = text.as_string::<i32>().iter().collect();
        assert_eq!(
            got,
            [
                Some(OTHER),
                Some(NEW),
                Some(NEW),
                None,
                Some(NEW),
                Some(OTHER)
            ]
        );
        assert_eq!(
            PersonsMode::parse("disabled"),
            Some(PersonsMode::IdOverridePropertiesJoined)
        );
        assert_eq!(PersonsMode::parse("nope"), None);
    }
}
