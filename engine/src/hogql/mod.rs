//! HogQL: PostHog's ClickHouse-flavoured SQL, planned onto DataFusion.
//!
//! `ast`, `lexer`, `parser` and `print` are pure (no DataFusion, no I/O). `functions` maps
//! HogQL function calls onto DataFusion expressions and our own UDFs; the planner resolves a
//! parsed query against the virtual schema and builds a DataFusion logical plan directly.

pub mod ast;
pub mod functions;
pub mod lexer;
pub mod overrides;
pub mod parser;
pub mod planner;
pub mod print;
pub mod property;
pub mod schema;
