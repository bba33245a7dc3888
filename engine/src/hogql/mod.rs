//! HogQL: PostHog's ClickHouse-flavoured SQL, planned onto DataFusion.
//!
//! `ast`, `lexer`, `parser` and `print` are the `hedgerow-hogql-syntax` crate (pure: no
//! DataFusion, no I/O), re-exported here. `functions` maps
//! HogQL function calls onto DataFusion expressions and our own UDFs; the planner resolves a
//! parsed query against the virtual schema and builds a DataFusion logical plan directly.

pub(crate) use hedgerow_hogql_syntax::{ast, lexer, nesting, parser, print, visit};

pub mod functions;
pub mod overrides;
pub mod planner;
pub(crate) mod property;
pub mod schema;
