//! Ids in 16 bytes: the events table's `uuid` and `person_id` are Parquet
//! `FIXED_LEN_BYTE_ARRAY(16)` (Arrow `FixedSizeBinary(16)`), not 36-character strings.
//!
//! Without Parquet's UUID logical type: Delta's schema calls the column `binary`, and
//! pyarrow 26 reading the table through delta-rs refuses a UUID-typed file column under a
//! `binary` table column ("Invalid storage type for UuidType: binary"), where it reads plain
//! fixed-size binary as binary.
//!
//! Delta Lake has no fixed-size type: the table's schema says `binary`, so a scan through
//! delta-rs returns these columns as `Binary` (or `BinaryView`) values of 16 bytes, and a
//! table created before 16-byte ids keeps them as `string`. Everything that meets an id
//! column converts through here: [`to_uuid`] to the 16-byte form HogQL plans on, [`to_text`]
//! to PostHog's lowercase hyphenated text, [`convert`] to whichever type a table holds.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, FixedSizeBinaryArray, FixedSizeBinaryBuilder, StringBuilder,
};
use arrow::datatypes::{DataType, Field};
use arrow::error::ArrowError;

/// The events columns stored as 16-byte UUIDs.
pub(crate) const ID_COLUMNS: &[&str] = &["uuid", "person_id"];

/// The Arrow type of a 16-byte id.
pub(crate) const UUID_TYPE: DataType = DataType::FixedSizeBinary(16);

/// A 16-byte id field.
pub(crate) fn uuid_field(name: &str, nullable: bool) -> Field {
    Field::new(name, UUID_TYPE, nullable)
}

/// The 16 bytes of a UUID in any of the forms `uuid::Uuid` parses (hyphenated, simple,
/// braced, urn; any case).
pub(crate) fn parse(s: &str) -> Option<[u8; 16]> {
    uuid::Uuid::try_parse(s).ok().map(|u| *u.as_bytes())
}

/// The id at `row` of an id column of any representation (16-byte binary or text).
pub(crate) fn id_at(col: &dyn Array, row: usize) -> Option<[u8; 16]> {
    if col.is_null(row) {
        return None;
    }
    let bytes = |b: &[u8]| <[u8; 16]>::try_from(b).ok();
    match col.data_type() {
        DataType::FixedSizeBinary(16) => bytes(col.as_fixed_size_binary().value(row)),
        DataType::Binary => bytes(col.as_binary::<i32>().value(row)),
        DataType::LargeBinary => bytes(col.as_binary::<i64>().value(row)),
        DataType::BinaryView => bytes(col.as_binary_view().value(row)),
        DataType::Utf8 => parse(col.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => parse(col.as_string::<i64>().value(row)),
        DataType::Utf8View => parse(col.as_string_view().value(row)),
        _ => None,
    }
}

/// Whether `t` is a representation of ids this module reads.
fn is_id_repr(t: &DataType) -> bool {
    matches!(
        t,
        DataType::FixedSizeBinary(16)
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
    )
}

/// `col` as 16-byte ids; a value that is not a UUID (text that does not parse, binary of
/// another length) becomes NULL.
pub(crate) fn to_uuid(col: &dyn Array) -> Result<FixedSizeBinaryArray, ArrowError> {
    if let Some(a) = col.as_fixed_size_binary_opt()
        && a.value_length() == 16
    {
        return Ok(a.clone());
    }
    // The files' ids through Delta (`binary`, which DataFusion reads as BinaryView):
    // 16-byte values, copied as they are (others become NULL).
    if let Some(a) = col.as_binary_opt::<i32>() {
        return Ok(from_bytes(col, |i| a.value(i)));
    }
    if let Some(a) = col.as_binary_opt::<i64>() {
        return Ok(from_bytes(col, |i| a.value(i)));
    }
    if let Some(a) = col.as_binary_view_opt() {
        return Ok(from_bytes(col, |i| a.value(i)));
    }
    if !is_id_repr(col.data_type()) {
        return Err(ArrowError::CastError(format!(
            "cannot read {} as a UUID",
            col.data_type()
        )));
    }
    let mut b = FixedSizeBinaryBuilder::with_capacity(col.len(), 16);
    for row in 0..col.len() {
        match id_at(col, row) {
            Some(id) => b.append_value(id)?,
            None => b.append_null(),
        }
    }
    Ok(b.finish())
}

/// `col`'s 16-byte values (`value(row)`) as ids; NULL where `col` is NULL or a value has
/// another length. One copy into one buffer: this runs on every id column a query reads.
fn from_bytes<'a>(col: &'a dyn Array, value: impl Fn(usize) -> &'a [u8]) -> FixedSizeBinaryArray {
    let n = col.len();
    let mut bytes = Vec::with_capacity(n * 16);
    let mut valid = arrow::array::BooleanBufferBuilder::new(n);
    for row in 0..n {
        let v = if col.is_valid(row) { value(row) } else { &[] };
        if v.len() == 16 {
            bytes.extend_from_slice(v);
            valid.append(true);
        } else {
            bytes.extend_from_slice(&[0; 16]);
            valid.append(false);
        }
    }
    let nulls = arrow::buffer::NullBuffer::new(valid.finish());
    let nulls = (nulls.null_count() > 0).then_some(nulls);
    FixedSizeBinaryArray::new(16, bytes.into(), nulls)
}

/// `col` (ids of any representation) as PostHog shows them: lowercase hyphenated text.
/// Text that is not a UUID is kept as it is.
pub(crate) fn to_text(col: &dyn Array) -> Result<ArrayRef, ArrowError> {
    match col.data_type() {
        DataType::Utf8 => return Ok(arrow::array::make_array(col.to_data())),
        DataType::LargeUtf8 | DataType::Utf8View => {
            return arrow::compute::cast(&arrow::array::make_array(col.to_data()), &DataType::Utf8);
        }
        t if !is_id_repr(t) => {
            return Err(ArrowError::CastError(format!("cannot read {t} as a UUID")));
        }
        _ => {}
    }
    let mut out = StringBuilder::with_capacity(col.len(), col.len() * 36);
    let mut buf = uuid::Uuid::encode_buffer();
    for row in 0..col.len() {
        match id_at(col, row) {
            Some(id) => out.append_value(
                uuid::Uuid::from_bytes(id)
                    .hyphenated()
                    .encode_lower(&mut buf),
            ),
            None => out.append_null(),
        }
    }
    Ok(Arc::new(out.finish()))
}

/// `col` converted to `target` when one of them is a 16-byte id column and the other a
/// representation of ids (text or binary); `None` when this is not such a conversion.
pub(crate) fn convert(col: &ArrayRef, target: &DataType) -> Option<Result<ArrayRef, ArrowError>> {
    let from = col.data_type();
    let involves_uuid = matches!(from, DataType::FixedSizeBinary(16))
        || matches!(target, DataType::FixedSizeBinary(16));
    if !involves_uuid || !is_id_repr(from) || !is_id_repr(target) {
        return None;
    }
    Some(match target {
        DataType::FixedSizeBinary(16) => to_uuid(col).map(|a| Arc::new(a) as ArrayRef),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            to_text(col).and_then(|t| arrow::compute::cast(&t, target))
        }
        _ => arrow::compute::cast(col, target),
    })
}

/// The schema Parquet files of a table with `table` schema are written in: the id columns
/// that the table holds as `binary` are written as 16-byte values. A table that holds them
/// as text (created before 16-byte ids) keeps writing text.
pub(crate) fn file_schema(table: &arrow::datatypes::Schema) -> arrow::datatypes::SchemaRef {
    let fields: Vec<Field> = table
        .fields()
        .iter()
        .map(|f| {
            if ID_COLUMNS.contains(&f.name().as_str())
                && matches!(
                    f.data_type(),
                    DataType::Binary | DataType::LargeBinary | DataType::BinaryView
                )
            {
                uuid_field(f.name(), f.is_nullable())
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    Arc::new(arrow::datatypes::Schema::new_with_metadata(
        fields,
        table.metadata().clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BinaryArray, StringArray};

    const A: &str = "018cc2ea-2d9c-75d3-9f6b-97091fc715c6";

    #[test]
    fn every_representation_reads_as_the_same_id() {
        let id = parse(A).unwrap();
        let text: ArrayRef = Arc::new(StringArray::from(vec![Some(A), None, Some("not-a-uuid")]));
        let upper: ArrayRef = Arc::new(StringArray::from(vec![A.to_uppercase()]));
        let bin: ArrayRef = Arc::new(BinaryArray::from(vec![&id[..]]));
        let u = to_uuid(text.as_ref()).unwrap();
        assert_eq!(u.value(0), id);
        assert!(
            u.is_null(1) && u.is_null(2),
            "NULL and text that is not a UUID"
        );
        assert_eq!(to_uuid(upper.as_ref()).unwrap().value(0), id);
        assert_eq!(to_uuid(bin.as_ref()).unwrap().value(0), id);
        // As DataFusion reads the files' `binary` ids: views; NULL and other lengths are NULL.
        let views: ArrayRef = Arc::new(arrow::array::BinaryViewArray::from(vec![
            Some(&id[..]),
            None,
            Some(&id[..5]),
            Some(&id[..]),
        ]));
        let v = to_uuid(views.as_ref()).unwrap();
        assert_eq!((v.value(0), v.value(3)), (&id[..], &id[..]));
        assert!(v.is_null(1) && v.is_null(2) && v.is_valid(3));
        let back = to_text(&u).unwrap();
        assert_eq!(back.as_string::<i32>().value(0), A);
        assert_eq!(
            to_text(bin.as_ref()).unwrap().as_string::<i32>().value(0),
            A
        );
        // Text stays as it was, even when it is not a UUID.
        assert_eq!(
            to_text(text.as_ref()).unwrap().as_string::<i32>().value(2),
            "not-a-uuid"
        );
    }

    #[test]
    fn conversions_between_table_representations() {
        let u: ArrayRef = Arc::new(to_uuid(&StringArray::from(vec![A])).unwrap());
        let bin = convert(&u, &DataType::Binary).unwrap().unwrap();
        assert_eq!(bin.as_binary::<i32>().value(0).len(), 16);
        assert_eq!(
            to_uuid(bin.as_ref()).unwrap().value(0),
            u.as_fixed_size_binary().value(0)
        );
        assert_eq!(
            convert(&u, &DataType::Utf8)
                .unwrap()
                .unwrap()
                .as_string::<i32>()
                .value(0),
            A
        );
        let s: ArrayRef = Arc::new(StringArray::from(vec!["x"]));
        assert!(convert(&s, &DataType::Int64).is_none());
        assert!(
            convert(&s, &DataType::LargeUtf8).is_none(),
            "not an id conversion"
        );
    }

    #[test]
    fn binary_id_columns_are_written_as_uuids() {
        let table = arrow::datatypes::Schema::new(vec![
            Field::new("uuid", DataType::Binary, false),
            Field::new("person_id", DataType::Utf8, false),
            Field::new("distinct_id", DataType::Utf8, false),
        ]);
        let f = file_schema(&table);
        assert_eq!(f.field(0).data_type(), &UUID_TYPE);
        assert_eq!(
            f.field(1).data_type(),
            &DataType::Utf8,
            "a text table keeps text"
        );
        assert_eq!(f.field(2).data_type(), &DataType::Utf8);
    }
}
