//! The Parquet reader on damaged files, as hedgerow's scan opens them (footer, embedded
//! Arrow schema, page index, every column decoded in batches).
//!
//! The property is the one hedgerow relies on: a damaged file never takes the process
//! down. The reader (arrow-rs's `parquet` and `arrow-ipc`) panics on some damaged footers
//! and pages; a query runs as its own task with unwinding panics, so such a panic fails
//! that query (500, `engine/src/query/error.rs`) and nothing else. Here a panic is caught
//! the same way and counts as a refusal; what AFL reports is what unwinding cannot contain:
//! an abort (an allocation the machine cannot give), a stack overflow, or a hang.
use bytes::Bytes;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::file::metadata::PageIndexPolicy;

fn read(data: &[u8]) {
    let bytes = Bytes::copy_from_slice(data);
    let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
    let Ok(builder) = ParquetRecordBatchReaderBuilder::try_new_with_options(bytes, options) else {
        return;
    };
    let Ok(reader) = builder.with_batch_size(1024).build() else {
        return;
    };
    for batch in reader {
        if batch.is_err() {
            return;
        }
    }
}

fn main() {
    // Upstream panics are expected and contained; their messages would only slow the run.
    std::panic::set_hook(Box::new(|_| {}));
    afl::fuzz_nohook!(|data: &[u8]| {
        let _ = std::panic::catch_unwind(|| read(data));
    });
}
