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

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result as DFResult, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// A project's overrides, old person id → current person id.
#[derive(Debug, Default)]
pub struct OverrideMap {
    /// Distinguishes maps for plan equality (the store's version when it was read).
    pub version: u64,
    pub map: HashMap<String, String>,
}

/// How `person_id` and `person.properties` of events are read (PostHog's
/// `personsOnEventsMode` modifier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PersonsMode {
    /// The event's own person id, the event-time snapshot of properties.
    IdNoOverridePropertiesOnEvents,
    /// Merged persons' events answer as the merged-into person; event-time properties.
    #[default]
    IdOverridePropertiesOnEvents,
    /// Overrides applied, and `person.properties` are the person's current properties.
    IdOverridePropertiesJoined,
}

impl PersonsMode {
    pub const NAMES: &[&str] = &[
        "person_id_no_override_properties_on_events",
        "person_id_override_properties_on_events",
        "person_id_override_properties_joined",
        "disabled",
    ];

    /// Reads the modifier; `disabled` (persons read from the persons tables) is answered as
    /// the joined mode, which gives the same persons.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "person_id_no_override_properties_on_events" => {
                Some(Self::IdNoOverridePropertiesOnEvents)
            }
            "person_id_override_properties_on_events" => Some(Self::IdOverridePropertiesOnEvents),
            "person_id_override_properties_joined" | "disabled" => {
                Some(Self::IdOverridePropertiesJoined)
            }
            _ => None,
        }
    }

    pub fn overrides(self) -> bool {
        self != Self::IdNoOverridePropertiesOnEvents
    }

    pub fn joined_properties(self) -> bool {
        self == Self::IdOverridePropertiesJoined
    }
}

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

/// `person_id` read through the overrides.
pub fn override_person_id(person_id: Expr, map: Arc<OverrideMap>) -> Expr {
    Expr::ScalarFunction(datafusion::logical_expr::expr::ScalarFunction::new_udf(
        Arc::new(ScalarUDF::new_from_impl(OverrideUdf {
            signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
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
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        let ids = args.args[0].to_array(args.number_rows)?;
        let Some(ids) = ids.as_string_opt::<i32>() else {
            return exec_err!("person ids must be text");
        };
        let map = &self.map.map;
        // Most batches hold no merged person: hand the column back untouched then.
        if !(0..ids.len()).any(|i| ids.is_valid(i) && map.contains_key(ids.value(i))) {
            return Ok(ColumnarValue::Array(Arc::new(ids.clone()) as ArrayRef));
        }
        let mut out = StringBuilder::with_capacity(ids.len(), ids.value_data().len());
        for i in 0..ids.len() {
            if ids.is_null(i) {
                out.append_null();
                continue;
            }
            let v = ids.value(i);
            out.append_value(map.get(v).map_or(v, String::as_str));
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::StringArray;
    use datafusion::arrow::datatypes::Field;
    use datafusion::config::ConfigOptions;

    #[test]
    fn maps_only_overridden_ids() {
        let map = Arc::new(OverrideMap {
            version: 1,
            map: HashMap::from([("old".to_string(), "new".to_string())]),
        });
        let udf = OverrideUdf {
            signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
            map,
        };
        let run = |vals: Vec<Option<&str>>| {
            let n = vals.len();
            let arr: ArrayRef = Arc::new(StringArray::from(vals));
            let out = udf
                .invoke_with_args(ScalarFunctionArgs {
                    args: vec![ColumnarValue::Array(arr)],
                    arg_fields: vec![Arc::new(Field::new("p", DataType::Utf8, true))],
                    number_rows: n,
                    return_field: Arc::new(Field::new("p", DataType::Utf8, true)),
                    config_options: Arc::new(ConfigOptions::default()),
                })
                .unwrap();
            let ColumnarValue::Array(a) = out else {
                panic!()
            };
            a.as_string::<i32>()
                .iter()
                .map(|v| v.map(str::to_owned))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            run(vec![Some("a"), None, Some("old")]),
            vec![Some("a".to_string()), None, Some("new".to_string())]
        );
        assert_eq!(run(vec![Some("a")]), vec![Some("a".to_string())]);
        assert_eq!(
            PersonsMode::parse("disabled"),
            Some(PersonsMode::IdOverridePropertiesJoined)
        );
        assert_eq!(PersonsMode::parse("nope"), None);
    }
}
