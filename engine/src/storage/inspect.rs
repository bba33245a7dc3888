//! Looking for text that should be gone: a raw byte search of every file under a directory,
//! and a decoded search of every Parquet file's string values (compressed pages hide text
//! from a byte search). Used to prove an erasure left nothing behind: by the engine's tests,
//! the integration tests and operators checking a data directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BinaryViewArray, LargeBinaryArray, LargeStringArray,
    StringArray, StringViewArray,
};
use arrow::datatypes::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Every regular file under `dir` (recursively, symlinks not followed), sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                stack.push(e.path());
            } else if kind.is_file() {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Whether `needle` occurs in `haystack` (an empty needle never does).
pub fn contains_bytes(haystack: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else {
        return false;
    };
    let mut at = 0;
    while let Some(i) = haystack[at..].iter().position(|&b| b == first) {
        let start = at + i;
        let end = start + needle.len();
        if end > haystack.len() {
            return false;
        }
        if &haystack[start + 1..end] == rest {
            return true;
        }
        at = start + 1;
    }
    false
}

/// Raw byte search of every file under `dir`: one `(file, needle)` per needle a file holds.
/// A file that cannot be read is reported with the needle `"<unreadable: …>"`.
pub fn grep_dir(dir: &Path, needles: &[&str]) -> Vec<(PathBuf, String)> {
    let mut hits = Vec::new();
    for path in files_under(dir) {
        match std::fs::read(&path) {
            Ok(bytes) => {
                for n in needles {
                    if contains_bytes(&bytes, n.as_bytes()) {
                        hits.push((path.clone(), (*n).to_owned()));
                    }
                }
            }
            Err(e) => hits.push((path, format!("<unreadable: {e}>"))),
        }
    }
    hits
}

/// Opens every `*.parquet` file under `dir` (data files, stale files, checkpoints alike),
/// decodes every string and binary value, nested ones included, and reports each value that
/// contains a needle as `(file, value)`. A file that cannot be decoded is reported with the
/// value `"<unreadable parquet: …>"`, so a caller asserting "no hits" cannot pass on a file
/// it never looked into.
pub fn parquet_values_containing(dir: &Path, needles: &[&str]) -> Vec<(PathBuf, String)> {
    let mut hits = Vec::new();
    for path in files_under(dir) {
        if !path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".parquet"))
        {
            continue;
        }
        if let Err(e) = scan_parquet(&path, needles, &mut hits) {
            hits.push((path, format!("<unreadable parquet: {e}>")));
        }
    }
    hits
}

fn scan_parquet(
    path: &Path,
    needles: &[&str],
    hits: &mut Vec<(PathBuf, String)>,
) -> Result<(), Box<dyn std::error::Error>> {
    let file = std::fs::File::open(path)?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)?.build()?;
    for batch in reader {
        let batch = batch?;
        for col in batch.columns() {
            visit_strings(col, &mut |v: &str| {
                if needles.iter().any(|n| !n.is_empty() && v.contains(n)) {
                    hits.push((path.to_path_buf(), v.to_owned()));
                }
            });
        }
    }
    Ok(())
}

/// Calls `f` with every non-null string (binary values as lossy UTF-8) in `array`,
/// descending into structs, lists, maps and dictionaries.
fn visit_strings(array: &ArrayRef, f: &mut dyn FnMut(&str)) {
    fn each<'a>(n: usize, nulls: &dyn Array, get: impl Fn(usize) -> &'a [u8]) -> Vec<&'a [u8]> {
        (0..n).filter(|&i| nulls.is_valid(i)).map(get).collect()
    }
    let n = array.len();
    let values: Vec<&[u8]> = match array.data_type() {
        DataType::Utf8 => {
            let a: &StringArray = array.as_string();
            each(n, a, |i| a.value(i).as_bytes())
        }
        DataType::LargeUtf8 => {
            let a: &LargeStringArray = array.as_string();
            each(n, a, |i| a.value(i).as_bytes())
        }
        DataType::Utf8View => {
            let a: &StringViewArray = array.as_string_view();
            each(n, a, |i| a.value(i).as_bytes())
        }
        DataType::Binary => {
            let a: &BinaryArray = array.as_binary();
            each(n, a, |i| a.value(i))
        }
        DataType::LargeBinary => {
            let a: &LargeBinaryArray = array.as_binary();
            each(n, a, |i| a.value(i))
        }
        DataType::BinaryView => {
            let a: &BinaryViewArray = array.as_binary_view();
            each(n, a, |i| a.value(i))
        }
        DataType::FixedSizeBinary(_) => {
            let a = array.as_fixed_size_binary();
            each(n, a, |i| a.value(i))
        }
        DataType::Struct(_) => {
            for c in array.as_struct().columns() {
                visit_strings(c, f);
            }
            return;
        }
        DataType::List(_) => {
            visit_strings(array.as_list::<i32>().values(), f);
            return;
        }
        DataType::LargeList(_) => {
            visit_strings(array.as_list::<i64>().values(), f);
            return;
        }
        DataType::FixedSizeList(..) => {
            visit_strings(array.as_fixed_size_list().values(), f);
            return;
        }
        DataType::Map(..) => {
            let m = array.as_map();
            visit_strings(&(Arc::new(m.entries().clone()) as ArrayRef), f);
            return;
        }
        DataType::Dictionary(..) => {
            visit_strings(array.as_any_dictionary().values(), f);
            return;
        }
        _ => return,
    };
    for v in values {
        f(&String::from_utf8_lossy(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{MapBuilder, RecordBatch, StringBuilder, StructArray};
    use arrow::datatypes::{Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::WriterProperties;

    #[test]
    fn byte_search() {
        assert!(contains_bytes(b"xxabcxx", b"abc"));
        assert!(contains_bytes(b"abc", b"abc"));
        assert!(contains_bytes(b"aababc", b"abc"));
        assert!(!contains_bytes(b"abxabd", b"abc"));
        assert!(!contains_bytes(b"ab", b"abc"));
        assert!(!contains_bytes(b"abc", b""));
    }

    /// A zstd file hides its text from the byte search; the decoded search still finds it,
    /// nested in a struct and a map too.
    #[test]
    fn finds_values_a_byte_search_misses() {
        let dir = tempfile::tempdir().unwrap();
        let n = 2000;
        let plain: StringArray = (0..n)
            .map(|i| Some(format!("filler text number {i} planted-secret-xyz {i}")))
            .collect();
        let inner: StringArray = (0..n).map(|i| Some(format!("inner {i}"))).collect();
        let strukt = StructArray::from(vec![(
            Arc::new(Field::new("s", DataType::Utf8, true)),
            Arc::new(inner) as ArrayRef,
        )]);
        let mut map = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
        for i in 0..n {
            map.keys().append_value("k");
            map.values()
                .append_value(if i == 7 { "in-a-map-777" } else { "v" });
            map.append(true).unwrap();
        }
        let map = map.finish();
        let schema = Schema::new(vec![
            Field::new("plain", DataType::Utf8, true),
            Field::new("st", strukt.data_type().clone(), true),
            Field::new("m", map.data_type().clone(), true),
        ]);
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            vec![Arc::new(plain), Arc::new(strukt), Arc::new(map)],
        )
        .unwrap();
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).unwrap()))
            .set_statistics_enabled(parquet::file::properties::EnabledStatistics::None)
            .build();
        let sub = dir.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        let path = sub.join("x.parquet");
        let mut w = ArrowWriter::try_new(
            std::fs::File::create(&path).unwrap(),
            batch.schema(),
            Some(props),
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        std::fs::write(dir.path().join("log.json"), "{\"min\":\"plain-needle-1\"}").unwrap();
        std::fs::write(dir.path().join("a/broken.parquet"), "not parquet").unwrap();

        let needles = ["planted-secret-xyz", "in-a-map-777", "plain-needle-1"];
        // The byte search sees the JSON but not the compressed column's values.
        let raw = grep_dir(dir.path(), &needles);
        assert!(raw.contains(&(dir.path().join("log.json"), "plain-needle-1".to_owned())));
        assert!(
            !raw.iter().any(|(_, n)| n == "planted-secret-xyz"),
            "{raw:?}"
        );
        let found = parquet_values_containing(dir.path(), &needles);
        let in_file = |p: &Path| found.iter().filter(|(f, _)| f == p).count();
        assert_eq!(in_file(&path), n + 1, "{:?}", &found[..3]);
        assert!(found.iter().any(|(_, v)| v == "in-a-map-777"));
        // A file that is not Parquet is reported, not skipped.
        assert!(
            found
                .iter()
                .any(|(f, v)| f.ends_with("broken.parquet") && v.starts_with("<unreadable"))
        );
    }
}
