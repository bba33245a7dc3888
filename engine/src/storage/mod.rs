//! Storage: the Arrow buffer, the Parquet/Delta events table on an object store, the
//! single-writer lease, compaction. The only way event data reaches a disk or a bucket.

pub mod buffer;
pub mod inspect;
pub mod lease;
pub mod schema;
pub mod table;
