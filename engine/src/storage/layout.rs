//! Property columns: a project's frequent event properties stored as typed columns, the rest
//! of `properties` kept as residual JSON.
//!
//! Each project has an append-only list of promoted properties ([`TeamLayout`]); the
//! metadata store decides and persists it (`meta::property_columns`). A row records in
//! [`LAYOUT_COLUMN`] how many of its project's list were promoted when it was written: row
//! layout `n` holds the first `n` properties as columns, and rows written before storage v2
//! have no layout (NULL), so they hold none. A held property's column has the property's
//! HogQL reading for every row (complete), so a query reads the column alone; the residual
//! JSON keeps the key only when the column cannot give back its exact JSON value (a number
//! in a String property, `null`, `""`, a string in a Numeric one, `3.0`), so the full
//! `properties` is the residual plus every non-null column whose key the residual lacks
//! ([`rebuild`]). serde_json keeps object keys sorted, so the rebuilt text is byte for byte
//! the text stored before.
//!
//! Columns are table-wide and named by key and Arrow type ([`column_name`]); a project's row
//! leaves the columns of other projects' properties NULL.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, Float64Builder, RecordBatch, StringBuilder,
    new_null_array,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde_json::{Map, Value};

use crate::model::TeamId;
use crate::propdefs::{PropertyKind, PropertyType};

/// The Int32 column saying how many of its project's promoted event properties a row holds.
pub(crate) const LAYOUT_COLUMN: &str = "props_layout";

/// The same for the person properties stamped on the row.
pub(crate) const PERSON_LAYOUT_COLUMN: &str = "person_props_layout";

/// The field metadata naming the event property a promoted column holds (in the Delta
/// schema and the Arrow schema readers see).
pub(crate) const PROPERTY_KEY_METADATA: &str = "hedgerow.property";

/// The same for a promoted person property.
pub(crate) const PERSON_PROPERTY_KEY_METADATA: &str = "hedgerow.person_property";

/// Which JSON column of a row a promoted property comes from: the event's `properties` or
/// the `person_properties` stamped on it. Each has its own list per project, its own layout
/// column and its own column names (`p_…`, `pp_…`); the rules are the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    Event,
    Person,
}

impl Family {
    pub const ALL: [Family; 2] = [Family::Event, Family::Person];

    /// The residual JSON column.
    pub fn json_column(self) -> &'static str {
        match self {
            Family::Event => "properties",
            Family::Person => "person_properties",
        }
    }

    /// The Int32 column saying how many of the family's promoted properties a row holds.
    pub fn layout_column(self) -> &'static str {
        match self {
            Family::Event => LAYOUT_COLUMN,
            Family::Person => PERSON_LAYOUT_COLUMN,
        }
    }

    /// The field metadata key naming a promoted column's property.
    pub fn metadata_key(self) -> &'static str {
        match self {
            Family::Event => PROPERTY_KEY_METADATA,
            Family::Person => PERSON_PROPERTY_KEY_METADATA,
        }
    }

    /// Whose property definitions type the family's properties.
    pub fn kind(self) -> PropertyKind {
        match self {
            Family::Event => PropertyKind::Event,
            Family::Person => PropertyKind::Person,
        }
    }

    /// The family by its residual JSON column.
    pub fn of_json_column(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.json_column() == name)
    }

    /// Its name in the metadata store.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Event => "event",
            Family::Person => "person",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Family::Event => "p_",
            Family::Person => "pp_",
        }
    }
}

/// Keys never promoted: their values already have columns of their own.
pub(crate) const NEVER_PROMOTED: &[&str] = &["$session_id", "$window_id", "$elements_chain"];

/// Event properties that a base column of the events table of the same name holds for
/// every row written since storage v1 (a non-empty string value, NULL otherwise): the
/// residual JSON drops such a key when its value is a non-empty string, as it drops a
/// promoted property its column gives back exactly, and these columns declare their key in
/// their field metadata ([`PROPERTY_KEY_METADATA`]) as promoted columns do, so every reader
/// rebuilds `properties` by the one rule. The two ids were ~90 % of the residual's bytes
/// (15.97 → 1.22 bytes/event on the bench's 2M events).
pub(crate) const COLUMN_PROPERTIES: &[&str] = &["$session_id", "$window_id"];

/// One promoted property of a project.
#[derive(Debug, Clone, PartialEq)]
pub struct PropertyColumn {
    pub family: Family,
    pub key: String,
    pub ty: PropertyType,
    /// The table column holding it.
    pub column: String,
}

impl PropertyColumn {
    /// A promoted event property.
    #[cfg(test)]
    pub(crate) fn new(key: &str, ty: PropertyType) -> Self {
        Self::of(Family::Event, key, ty)
    }

    pub(crate) fn of(family: Family, key: &str, ty: PropertyType) -> Self {
        PropertyColumn {
            family,
            key: key.to_owned(),
            ty,
            column: column_name(family, key, ty),
        }
    }
}

/// A project's promoted properties in promotion order (append-only).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TeamLayout {
    pub columns: Vec<PropertyColumn>,
}

impl TeamLayout {
    /// `key`'s position and column, when promoted.
    pub(crate) fn find(&self, key: &str) -> Option<(usize, &PropertyColumn)> {
        self.columns.iter().enumerate().find(|(_, c)| c.key == key)
    }
}

/// A promoted column of the table (of any project).
#[derive(Debug, Clone, PartialEq)]
pub struct TableColumn {
    pub name: String,
    pub ty: DataType,
    pub key: String,
    pub family: Family,
}

impl TableColumn {
    /// Its Arrow field, with the metadata naming its property.
    pub(crate) fn field(&self) -> Field {
        Field::new(&self.name, self.ty.clone(), true).with_metadata(HashMap::from([(
            self.family.metadata_key().to_string(),
            self.key.clone(),
        )]))
    }
}

/// Every project's layouts and the table-wide columns in first-promoted order.
#[derive(Debug, Clone, Default)]
pub struct Layouts {
    /// Event properties, per project.
    pub teams: HashMap<TeamId, Arc<TeamLayout>>,
    /// Person properties, per project.
    pub persons: HashMap<TeamId, Arc<TeamLayout>>,
    /// Each column once.
    pub columns: Vec<TableColumn>,
}

impl Layouts {
    /// `team`'s promoted event properties.
    pub(crate) fn team(&self, team: TeamId) -> Arc<TeamLayout> {
        self.of(Family::Event, team)
    }

    /// `team`'s promoted properties of `family`.
    pub(crate) fn of(&self, family: Family, team: TeamId) -> Arc<TeamLayout> {
        let map = match family {
            Family::Event => &self.teams,
            Family::Person => &self.persons,
        };
        map.get(&team).cloned().unwrap_or_default()
    }

    /// Adds `col` to `team`'s list of its family (and to the table's columns when new).
    pub(crate) fn push(&mut self, team: TeamId, col: PropertyColumn) {
        if !self.columns.iter().any(|c| c.name == col.column) {
            self.columns.push(TableColumn {
                name: col.column.clone(),
                ty: arrow_type(col.ty),
                key: col.key.clone(),
                family: col.family,
            });
        }
        let map = match col.family {
            Family::Event => &mut self.teams,
            Family::Person => &mut self.persons,
        };
        Arc::make_mut(map.entry(team).or_default())
            .columns
            .push(col);
    }
}

/// The Arrow type of a promoted property's column: DateTime properties keep their text (the
/// reading parses it, as for the JSON), so the value comes back exactly as sent.
pub(crate) fn arrow_type(ty: PropertyType) -> DataType {
    match ty {
        PropertyType::String | PropertyType::DateTime => DataType::Utf8,
        PropertyType::Numeric => DataType::Float64,
        PropertyType::Boolean => DataType::Boolean,
    }
}

/// The column of `key` read as `ty`: `p_<key>` for text, `p_<key>__num`, `p_<key>__bool`
/// (`pp_…` for person properties). Keys with characters other than `[a-z0-9_$]` (Delta
/// compares names case-insensitively) or longer than 64 characters get a stable 64-bit hash
/// suffix after a sanitized prefix. The key itself is in the column's metadata
/// ([`Family::metadata_key`]).
pub(crate) fn column_name(family: Family, key: &str, ty: PropertyType) -> String {
    let clean: String = key
        .chars()
        .take(64)
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '_' | '$' => c,
            _ => '_',
        })
        .collect();
    let mut name = format!("{}{clean}", family.prefix());
    if clean != key {
        // FNV-1a: stable across builds and platforms.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in key.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        name.push_str(&format!("__{h:016x}"));
    }
    match ty {
        PropertyType::String | PropertyType::DateTime => {}
        PropertyType::Numeric => name.push_str("__num"),
        PropertyType::Boolean => name.push_str("__bool"),
    }
    name
}

/// The hidden column of a person property in the persons snapshot (`query::person_snapshot`):
/// `__` and the property's person column name.
pub(crate) fn snapshot_person_column(key: &str, ty: PropertyType) -> String {
    format!("__{}", column_name(Family::Person, key, ty))
}

/// The string a property reads as: a missing key, JSON null and `""` are NULL; strings are
/// themselves; numbers, booleans, objects and arrays are their JSON text. HogQL's property
/// access gives the same answer, so a column and the JSON agree.
pub(crate) fn property_as_string(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// HogQL's `toFloat` of a string (ClickHouse's `toFloat64OrNull`): the one rule for the
/// function and for Numeric property columns.
pub(crate) fn parse_float(s: &str) -> Option<f64> {
    let t = s.strip_prefix('+').unwrap_or(s);
    if t.is_empty() || t.starts_with(['+', '-']) && s.starts_with('+') {
        return None;
    }
    match t.to_ascii_lowercase().as_str() {
        "inf" | "infinity" => return Some(f64::INFINITY),
        "-inf" | "-infinity" => return Some(f64::NEG_INFINITY),
        "nan" | "-nan" => return Some(f64::NAN),
        _ => {}
    }
    if !t
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'-' | b'+'))
    {
        return None;
    }
    t.parse().ok()
}

/// A promoted property's value in its column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Str(String),
    Num(f64),
    Bool(bool),
}

/// Integers up to 2^53 are exact in a Float64.
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

impl Cell {
    /// The JSON value the column gives back when the residual lacks the key.
    fn to_json(&self) -> Value {
        match self {
            Cell::Str(s) => Value::String(s.clone()),
            Cell::Bool(b) => Value::Bool(*b),
            Cell::Num(x) if x.fract() == 0.0 && x.abs() <= EXACT_INT => {
                Value::Number(serde_json::Number::from(*x as i64))
            }
            Cell::Num(x) => serde_json::Number::from_f64(*x).map_or(Value::Null, Value::Number),
        }
    }
}

/// What a held property puts in its column (its HogQL reading as `ty`), and whether the
/// residual JSON must keep the key because the column cannot give its value back exactly.
pub(crate) fn encode(ty: PropertyType, v: &Value) -> (Option<Cell>, bool) {
    let reading = property_as_string(Some(v));
    match ty {
        PropertyType::String | PropertyType::DateTime => {
            let exact = matches!(v, Value::String(s) if !s.is_empty());
            (reading.map(Cell::Str), !exact)
        }
        PropertyType::Numeric => {
            let cell = reading.as_deref().and_then(parse_float).map(Cell::Num);
            let exact = match v {
                Value::Number(n) => {
                    if let Some(i) = n.as_i64() {
                        i.unsigned_abs() <= 1 << 53
                    } else if let Some(u) = n.as_u64() {
                        u <= 1 << 53
                    } else {
                        n.as_f64()
                            .is_some_and(|x| x.fract() != 0.0 && x.is_finite())
                    }
                }
                _ => false,
            };
            (cell, !exact)
        }
        PropertyType::Boolean => {
            let cell = match reading.as_deref() {
                Some("true") => Some(Cell::Bool(true)),
                Some("false") => Some(Cell::Bool(false)),
                _ => None,
            };
            (cell, !v.is_boolean())
        }
    }
}

/// Splits `props` of `family` for a row of `layout`: each held property's cell (in `layout`
/// order) and the residual JSON text (serde_json's compact form of the remaining keys, in
/// order). Event properties also leave the [`COLUMN_PROPERTIES`] their columns hold.
pub(crate) fn split(
    props: &Map<String, Value>,
    layout: &TeamLayout,
    family: Family,
) -> (String, Vec<Option<Cell>>) {
    let mut cells = Vec::with_capacity(layout.columns.len());
    let mut drop: Vec<&str> = Vec::new();
    if family == Family::Event {
        drop.extend(
            COLUMN_PROPERTIES
                .iter()
                .filter(|k| matches!(props.get(**k), Some(Value::String(s)) if !s.is_empty())),
        );
    }
    for c in &layout.columns {
        match props.get(&c.key) {
            None => cells.push(None),
            Some(v) => {
                let (cell, keep) = encode(c.ty, v);
                if !keep {
                    drop.push(&c.key);
                }
                cells.push(cell);
            }
        }
    }
    let residual = if drop.is_empty() {
        serde_json::to_string(props).unwrap_or_default()
    } else {
        // `props` iterates in key order (serde_json's map is sorted), so the sorted `drop`
        // is walked alongside: one comparison per key, where a search of `drop` for every
        // key was an eighth of the ingest CPU with 50 promoted properties.
        drop.sort_unstable();
        let mut drop = drop.into_iter().peekable();
        let mut out = Vec::with_capacity(256);
        out.push(b'{');
        let mut first = true;
        for (k, v) in props {
            while drop.next_if(|d| *d < k.as_str()).is_some() {}
            if drop.next_if(|d| *d == k.as_str()).is_some() {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            // Writing into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut out, k);
            out.push(b':');
            let _ = serde_json::to_writer(&mut out, v);
        }
        out.push(b'}');
        String::from_utf8(out).unwrap_or_default()
    };
    (residual, cells)
}

/// The full `properties` text of a row: `residual` plus each non-null cell whose key the
/// residual lacks, as serde_json would write the whole object (keys in byte order).
///
/// The residual is serde_json's compact text of a key-sorted object, so this merges its
/// members, copied as they are, with the sorted cells, without parsing the values: about 10×
/// faster than parsing into a map and writing it out again, which it falls back to when the
/// residual is not in that form (then the result is the same too).
pub(crate) fn rebuild<'a>(
    residual: &str,
    cells: impl IntoIterator<Item = (&'a str, Cell)>,
) -> String {
    let mut cells: Vec<(&str, Cell)> = cells.into_iter().collect();
    if cells.is_empty() {
        return residual.to_owned();
    }
    cells.sort_by(|a, b| a.0.cmp(b.0));
    merge_sorted(residual, &cells).unwrap_or_else(|| rebuild_by_map(residual, cells))
}

fn rebuild_by_map(residual: &str, cells: Vec<(&str, Cell)>) -> String {
    let mut map: Map<String, Value> = match serde_json::from_str(residual) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    for (k, c) in cells {
        if !map.contains_key(k) {
            map.insert(k.to_owned(), c.to_json());
        }
    }
    serde_json::to_string(&map).unwrap_or_default()
}

/// The merge of [`rebuild`]; `None` when `residual` is not a compact object with sorted,
/// distinct keys.
fn merge_sorted(residual: &str, cells: &[(&str, Cell)]) -> Option<String> {
    let b = residual.as_bytes();
    if b.first() != Some(&b'{') || b.last() != Some(&b'}') {
        return None;
    }
    let mut out = String::with_capacity(residual.len() + cells.len() * 24);
    out.push('{');
    let mut first = true;
    let mut next_cell = 0;
    let push_cell = |out: &mut String, first: &mut bool, k: &str, c: &Cell| {
        if !*first {
            out.push(',');
        }
        *first = false;
        // Writing into a String cannot fail.
        out.push_str(&serde_json::to_string(k).unwrap_or_default());
        out.push(':');
        out.push_str(&serde_json::to_string(&c.to_json()).unwrap_or_default());
    };
    let mut i = 1;
    let mut last_key: Option<String> = None;
    while i < b.len() - 1 {
        // A member: "key":value, then ',' or the closing brace.
        if b[i] != b'"' {
            return None;
        }
        let key_end = json_string_end(b, i)?;
        let raw_key = &residual[i..key_end];
        let key: std::borrow::Cow<'_, str> = if raw_key[1..raw_key.len() - 1].contains('\\') {
            std::borrow::Cow::Owned(serde_json::from_str(raw_key).ok()?)
        } else {
            std::borrow::Cow::Borrowed(&raw_key[1..raw_key.len() - 1])
        };
        if b.get(key_end) != Some(&b':') {
            return None;
        }
        let value_end = json_value_end(b, key_end + 1).filter(|e| *e > key_end + 1)?;
        if last_key.as_deref().is_some_and(|l| l >= key.as_ref()) {
            return None;
        }
        while next_cell < cells.len() && cells[next_cell].0 < key.as_ref() {
            push_cell(
                &mut out,
                &mut first,
                cells[next_cell].0,
                &cells[next_cell].1,
            );
            next_cell += 1;
        }
        // The residual wins over a cell of the same key.
        while next_cell < cells.len() && cells[next_cell].0 == key.as_ref() {
            next_cell += 1;
        }
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&residual[i..value_end]);
        last_key = Some(key.into_owned());
        i = value_end;
        match b.get(i) {
            Some(b',') if i + 1 < b.len() - 1 => i += 1,
            Some(b'}') if i == b.len() - 1 => {}
            _ => return None,
        }
    }
    for (k, c) in &cells[next_cell..] {
        push_cell(&mut out, &mut first, k, c);
    }
    out.push('}');
    Some(out)
}

/// The end (exclusive) of the JSON string whose opening quote is at `i`.
pub(crate) fn json_string_end(s: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < s.len() {
        match s[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// The end (exclusive) of the JSON value starting at `i`, skipped without decoding it.
pub(crate) fn json_value_end(s: &[u8], i: usize) -> Option<usize> {
    match *s.get(i)? {
        b'"' => json_string_end(s, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < s.len() {
                match s[j] {
                    b'"' => {
                        j = json_string_end(s, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let mut j = i;
            while j < s.len() && !matches!(s[j], b',' | b'}' | b']') && !s[j].is_ascii_whitespace()
            {
                j += 1;
            }
            Some(j)
        }
    }
}

/// One promoted column being built.
pub(crate) enum TypedBuilder {
    Str(StringBuilder),
    Num(Float64Builder),
    Bool(BooleanBuilder),
}

impl TypedBuilder {
    pub(crate) fn new(ty: &DataType, n: usize) -> Self {
        match ty {
            DataType::Float64 => TypedBuilder::Num(Float64Builder::with_capacity(n)),
            DataType::Boolean => TypedBuilder::Bool(BooleanBuilder::with_capacity(n)),
            _ => TypedBuilder::Str(StringBuilder::with_capacity(n, 0)),
        }
    }
    /// Appends a copy of `cell` (a cell several rows share).
    pub(crate) fn append_ref(&mut self, cell: Option<&Cell>) {
        match (self, cell) {
            (TypedBuilder::Str(b), Some(Cell::Str(s))) => b.append_value(s),
            (TypedBuilder::Num(b), Some(Cell::Num(x))) => b.append_value(*x),
            (TypedBuilder::Bool(b), Some(Cell::Bool(x))) => b.append_value(*x),
            (TypedBuilder::Str(b), _) => b.append_null(),
            (TypedBuilder::Num(b), _) => b.append_null(),
            (TypedBuilder::Bool(b), _) => b.append_null(),
        }
    }
    pub(crate) fn append(&mut self, cell: Option<Cell>) {
        self.append_ref(cell.as_ref());
    }
    pub(crate) fn finish(&mut self) -> ArrayRef {
        match self {
            TypedBuilder::Str(b) => Arc::new(b.finish()),
            TypedBuilder::Num(b) => Arc::new(b.finish()),
            TypedBuilder::Bool(b) => Arc::new(b.finish()),
        }
    }
}

/// Where compaction learns the layouts and reports rows written before layouts existed.
pub(crate) trait LayoutSource: Send + Sync {
    /// Every project's promoted columns, as of now.
    fn layouts(&self) -> Arc<Layouts>;
    /// Counts the keys of a project's rows that have no layout of `family` (written before
    /// storage v2), so an upgraded table's frequent properties are promoted without waiting
    /// for new events.
    fn observe_rows(&self, team: TeamId, family: Family, rows: &[Map<String, Value>]);
}

/// Fixed layouts, for tests of the table alone.
#[cfg(test)]
pub(crate) struct FixedLayouts(pub Layouts);

#[cfg(test)]
impl LayoutSource for FixedLayouts {
    fn layouts(&self) -> Arc<Layouts> {
        Arc::new(self.0.clone())
    }
    fn observe_rows(&self, _: TeamId, _: Family, _: &[Map<String, Value>]) {}
}

/// Rewrites the rows of `batch` (one project's) that hold fewer promoted columns of
/// `family` than `team` (the project's list of that family) has now into its current
/// layout: the newly promoted keys move from the residual JSON into their columns. The
/// result has [`batch_schema`]`(layouts)` (columns `batch` lacks are NULL, other columns of
/// `batch` are dropped).
pub(crate) fn relayout(
    batch: &RecordBatch,
    family: Family,
    team: &TeamLayout,
    layouts: &Layouts,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    use arrow::array::{Int32Array, StringBuilder};
    let schema = super::schema::batch_schema(layouts);
    let batch = conform(batch, &schema)?;
    let n = batch.num_rows();
    let target = team.columns.len();
    let layout = batch
        .column_by_name(family.layout_column())
        .expect("conformed")
        .as_primitive::<arrow::datatypes::Int32Type>()
        .clone();
    if (0..n).all(|i| layout.is_valid(i) && layout.value(i) as usize >= target) {
        return Ok(batch);
    }
    let residual = batch
        .column_by_name(family.json_column())
        .expect("conformed")
        .as_string::<i32>()
        .clone();
    // The table column index of each of the project's promoted properties.
    let global: Vec<usize> = team
        .columns
        .iter()
        .map(|c| {
            schema.index_of(&c.column).map_err(|_| {
                arrow::error::ArrowError::SchemaError(format!("no column {}", c.column))
            })
        })
        .collect::<Result<_, _>>()?;
    let mut new_residual = StringBuilder::with_capacity(n, residual.value_data().len());
    let mut new_cells: Vec<Vec<Option<Cell>>> = vec![Vec::new(); n];
    for (i, cells) in new_cells.iter_mut().enumerate() {
        let held = if layout.is_valid(i) {
            layout.value(i).max(0) as usize
        } else {
            0
        };
        if held >= target || residual.is_null(i) {
            new_residual.append_option(residual.is_valid(i).then(|| residual.value(i)));
            continue;
        }
        let map: Map<String, Value> = match serde_json::from_str(residual.value(i)) {
            Ok(Value::Object(m)) => m,
            _ => {
                // Not an object: nothing to move.
                new_residual.append_value(residual.value(i));
                continue;
            }
        };
        let rest = TeamLayout {
            columns: team.columns[held..].to_vec(),
        };
        let (text, moved) = split(&map, &rest, family);
        new_residual.append_value(text);
        *cells = std::iter::repeat_n(None, held).chain(moved).collect();
    }
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns[schema.index_of(family.json_column())?] = Arc::new(new_residual.finish());
    columns[schema.index_of(family.layout_column())?] =
        Arc::new(Int32Array::from(vec![target as i32; n]));
    for (k, &g) in global.iter().enumerate() {
        let old = batch.column(g);
        // A row that moved keys takes the new cell; one that held this column keeps its own.
        let pick = |i: usize| -> Option<Cell> {
            let held = if layout.is_valid(i) {
                layout.value(i).max(0) as usize
            } else {
                0
            };
            if held > k || new_cells[i].is_empty() {
                if old.is_null(i) {
                    return None;
                }
                Some(match old.data_type() {
                    DataType::Float64 => {
                        Cell::Num(old.as_primitive::<arrow::datatypes::Float64Type>().value(i))
                    }
                    DataType::Boolean => Cell::Bool(old.as_boolean().value(i)),
                    _ => Cell::Str(old.as_string::<i32>().value(i).to_owned()),
                })
            } else {
                new_cells[i][k].clone()
            }
        };
        let mut b = TypedBuilder::new(old.data_type(), n);
        for i in 0..n {
            b.append(pick(i));
        }
        columns[g] = b.finish();
    }
    RecordBatch::try_new(schema, columns)
}

/// `batch` with exactly the columns of `schema`, by name: columns it lacks are NULL, columns
/// of another type are cast (e.g. string views), columns `schema` lacks are dropped.
pub(crate) fn conform(
    batch: &RecordBatch,
    schema: &SchemaRef,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    if batch.schema() == *schema {
        return Ok(batch.clone());
    }
    let cols = schema
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            None => Ok(new_null_array(f.data_type(), batch.num_rows())),
            Some(c) if c.data_type() == f.data_type() => Ok(c.clone()),
            Some(c) => {
                super::ids::convert(c, f.data_type()).unwrap_or_else(|| cast(c, f.data_type()))
            }
        })
        .collect::<Result<Vec<ArrayRef>, _>>()?;
    RecordBatch::try_new_with_options(
        schema.clone(),
        cols,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
}

/// The union of `schemas`' fields by name, in first-seen order.
pub(crate) fn union_schema<'a>(schemas: impl IntoIterator<Item = &'a Schema>) -> SchemaRef {
    let mut fields: Vec<Field> = Vec::new();
    for s in schemas {
        for f in s.fields() {
            if !fields.iter().any(|g| g.name() == f.name()) {
                fields.push(f.as_ref().clone());
            }
        }
    }
    Arc::new(Schema::new(fields))
}

/// `batches` as one batch of the union of their schemas (rows of narrower batches are
/// NULL in the columns they lack).
pub(crate) fn concat_conformed<'a>(
    batches: impl IntoIterator<Item = &'a RecordBatch> + Clone,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let schemas: Vec<SchemaRef> = batches.clone().into_iter().map(|b| b.schema()).collect();
    let schema = if schemas.is_empty() {
        super::schema::events_schema()
    } else {
        union_schema(schemas.iter().map(|s| s.as_ref()))
    };
    let conformed = batches
        .into_iter()
        .map(|b| conform(b, &schema))
        .collect::<Result<Vec<_>, _>>()?;
    arrow::compute::concat_batches(&schema, &conformed)
}

/// The cells of row `row` of the promoted columns `cols` (name, key) of `batch`, for
/// [`rebuild`].
pub(crate) fn row_cells<'a>(
    cols: &'a [(ArrayRef, String)],
    row: usize,
) -> impl Iterator<Item = (&'a str, Cell)> + 'a {
    cols.iter().filter_map(move |(a, key)| {
        if a.is_null(row) {
            return None;
        }
        let cell = match a.data_type() {
            DataType::Float64 => {
                Cell::Num(a.as_primitive::<arrow::datatypes::Float64Type>().value(row))
            }
            DataType::Boolean => Cell::Bool(a.as_boolean().value(row)),
            _ => Cell::Str(a.as_string::<i32>().value(row).to_owned()),
        };
        Some((key.as_str(), cell))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn layout(cols: &[(&str, PropertyType)]) -> TeamLayout {
        TeamLayout {
            columns: cols
                .iter()
                .map(|(k, t)| PropertyColumn::new(k, *t))
                .collect(),
        }
    }

    #[test]
    fn names_are_stable_and_delta_safe() {
        let name = |k: &str, t| column_name(Family::Event, k, t);
        assert_eq!(name("$browser", PropertyType::String), "p_$browser");
        assert_eq!(name("revenue", PropertyType::Numeric), "p_revenue__num");
        assert_eq!(name("ok", PropertyType::Boolean), "p_ok__bool");
        assert_eq!(name("when", PropertyType::DateTime), "p_when");
        let odd = name("Plan Name", PropertyType::String);
        assert!(odd.starts_with("p__lan__ame__"), "{odd}");
        assert_ne!(odd, name("plan name", PropertyType::String));
        assert_eq!(odd, name("Plan Name", PropertyType::String));
        assert_eq!(
            column_name(Family::Person, "plan", PropertyType::String),
            "pp_plan",
            "person properties have columns of their own"
        );
    }

    /// Every value, in every type, comes back exactly: the rebuilt text equals the text the
    /// whole object serializes to, and the column holds the JSON reading.
    #[test]
    fn split_then_rebuild_gives_back_the_same_text() {
        let l = layout(&[
            ("s", PropertyType::String),
            ("n", PropertyType::Numeric),
            ("b", PropertyType::Boolean),
            ("d", PropertyType::DateTime),
        ]);
        let values = [
            json!("x"),
            json!(""),
            json!(null),
            json!(5),
            json!(-7),
            json!(3.0),
            json!(2.5),
            json!(1e300),
            json!(u64::MAX),
            json!(9007199254740993_i64),
            json!("5"),
            json!("abc"),
            json!(true),
            json!(false),
            json!("true"),
            json!({"a": [1, 2]}),
            json!([1]),
            json!("2024-01-01T00:00:00Z"),
        ];
        for v in &values {
            for key in ["s", "n", "b", "d"] {
                let props = json!({"a": 1, key: v.clone(), "z": "last"});
                let props = props.as_object().unwrap();
                let (residual, cells) = split(props, &l, Family::Event);
                let named: Vec<(&str, Cell)> = l
                    .columns
                    .iter()
                    .zip(cells.clone())
                    .filter_map(|(c, cell)| cell.map(|x| (c.key.as_str(), x)))
                    .collect();
                assert_eq!(
                    rebuild(&residual, named),
                    serde_json::to_string(props).unwrap(),
                    "{key} = {v}"
                );
                let i = l.columns.iter().position(|c| c.key == key).unwrap();
                let reading = property_as_string(Some(v));
                let want = match l.columns[i].ty {
                    PropertyType::String | PropertyType::DateTime => reading.map(Cell::Str),
                    PropertyType::Numeric => {
                        reading.as_deref().and_then(parse_float).map(Cell::Num)
                    }
                    PropertyType::Boolean => match reading.as_deref() {
                        Some("true") => Some(Cell::Bool(true)),
                        Some("false") => Some(Cell::Bool(false)),
                        _ => None,
                    },
                };
                assert_eq!(cells[i], want, "{key} = {v}");
            }
        }
    }

    /// Rows written under an older layout (or none) come out of `relayout` exactly as if
    /// they had been written under the current one.
    #[test]
    fn relayout_equals_writing_in_the_new_layout() {
        use crate::model::Event;
        use crate::storage::schema::events_to_batch;
        let events: Vec<Event> = (0..5)
            .map(|i| Event {
                uuid: uuid::Uuid::now_v7(),
                event: "e".into(),
                distinct_id: format!("d{i}"),
                timestamp: chrono::Utc::now(),
                created_at: chrono::Utc::now(),
                properties: json!({"s": format!("x{i}"), "n": if i == 2 { json!("2") } else { json!(i) }, "b": i % 2 == 0, "o": {"k": i}})
                    .as_object()
                    .unwrap()
                    .clone(),
            })
            .collect();
        let t = TeamId(3);
        let mut one = Layouts::default();
        one.push(t, PropertyColumn::new("s", PropertyType::String));
        let mut three = one.clone();
        three.push(t, PropertyColumn::new("n", PropertyType::Numeric));
        three.push(t, PropertyColumn::new("b", PropertyType::Boolean));
        let build = |l: &Layouts| events_to_batch(events.iter().map(|e| (t, e)), |_, _| None, l);
        let want = build(&three);
        for from in [build(&Layouts::default()), build(&one), want.clone()] {
            let got = relayout(&from, Family::Event, &three.team(t), &three).unwrap();
            assert_eq!(got.schema(), want.schema());
            for (i, f) in want.schema().fields().iter().enumerate() {
                assert_eq!(
                    got.column(i).as_ref(),
                    want.column(i).as_ref(),
                    "{}",
                    f.name()
                );
            }
        }
        // Rows from before storage v2 have no layout at all.
        let v1 = build(&Layouts::default());
        let mut cols = v1.columns().to_vec();
        let at = v1.schema().index_of(LAYOUT_COLUMN).unwrap();
        cols[at] = new_null_array(&DataType::Int32, v1.num_rows());
        let v1 = RecordBatch::try_new(v1.schema(), cols).unwrap();
        let got = relayout(&v1, Family::Event, &three.team(t), &three).unwrap();
        let p = want.schema().index_of("properties").unwrap();
        assert_eq!(got.column(p).as_ref(), want.column(p).as_ref());
        assert_eq!(got.column(at).as_ref(), want.column(at).as_ref());
    }

    /// The merge gives what parsing into a map and writing it out gives, also when the
    /// residual has escapes, nesting, and keys shared with the cells.
    #[test]
    fn merge_equals_rebuilding_by_map() {
        let residuals = [
            r#"{}"#,
            r#"{"a":1}"#,
            r#"{"$x":"q\"uo}te,","b":{"c":[1,{"d":"]"}],"e":null},"m":-1500.5,"z":true}"#,
            r#"{"k\"ey":"v","n":[]}"#,
            r#"{"s":5}"#,
        ];
        let cells = [
            vec![],
            vec![("a", Cell::Str("x".into())), ("zz", Cell::Num(2.0))],
            vec![
                ("$a", Cell::Bool(true)),
                ("b", Cell::Str("shadowed".into())),
                ("c", Cell::Num(0.25)),
            ],
            vec![("s", Cell::Str("5".into())), ("é", Cell::Str("e".into()))],
        ];
        for r in residuals {
            for c in &cells {
                let want = rebuild_by_map(r, c.clone());
                assert_eq!(rebuild(r, c.clone()), want, "{r} {c:?}");
            }
        }
        // Not the compact sorted form: the fallback answers.
        assert_eq!(
            rebuild(r#"{"b":1, "a":2}"#, vec![("c", Cell::Bool(false))]),
            r#"{"a":2,"b":1,"c":false}"#
        );
    }

    #[test]
    fn clean_values_leave_the_residual() {
        let l = layout(&[("s", PropertyType::String), ("n", PropertyType::Numeric)]);
        let props = json!({"s": "x", "n": 5, "o": 1});
        let (residual, _) = split(props.as_object().unwrap(), &l, Family::Event);
        assert_eq!(residual, r#"{"o":1}"#);
        let props = json!({"s": 5, "n": "5"});
        let (residual, _) = split(props.as_object().unwrap(), &l, Family::Event);
        assert_eq!(residual, r#"{"n":"5","s":5}"#, "inexact values stay");
    }

    /// `$session_id` and `$window_id` leave an event's residual when their columns give
    /// them back (non-empty strings), stay when not, and stay in person properties.
    #[test]
    fn column_properties_leave_the_event_residual() {
        let l = layout(&[]);
        let props = json!({"$session_id": "s1", "$window_id": "w1", "o": 1});
        let props = props.as_object().unwrap();
        assert_eq!(split(props, &l, Family::Event).0, r#"{"o":1}"#);
        assert_eq!(
            split(props, &l, Family::Person).0,
            serde_json::to_string(props).unwrap()
        );
        let props = json!({"$session_id": "", "$window_id": 7});
        let props = props.as_object().unwrap();
        assert_eq!(
            split(props, &l, Family::Event).0,
            r#"{"$session_id":"","$window_id":7}"#
        );
        // Given back by `rebuild` from the columns (as the readers do).
        let rebuilt = rebuild(
            r#"{"o":1}"#,
            [
                ("$session_id", Cell::Str("s1".into())),
                ("$window_id", Cell::Str("w1".into())),
            ],
        );
        assert_eq!(rebuilt, r#"{"$session_id":"s1","$window_id":"w1","o":1}"#);
    }
}
