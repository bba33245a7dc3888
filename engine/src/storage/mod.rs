//! Storage: the Arrow buffer, the Parquet/Delta events table on an object store, the
//! single-writer lease, compaction. The only way event data reaches a disk or a bucket.

pub(crate) mod buffer;
pub(crate) mod ids;
pub mod inspect;
pub(crate) mod layout;
pub(crate) mod lease;
pub(crate) mod schema;
pub(crate) mod table;
