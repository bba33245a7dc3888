//! HogQL's syntax: PostHog's ClickHouse-flavoured SQL as text and as a tree.
//!
//! `lexer` (text → tokens with byte spans), `parser` (tokens → [`ast`], recursive descent
//! for queries and a Pratt parser for expressions), `print` (tree → canonical text that
//! parses back to the same tree) and `grammar` (what the parser and printer share:
//! priorities, reserved words, quoting, nesting bounds) and `nesting` (the one guard on
//! recursion depth, shared with the engine's planner). Pure std: no DataFusion, no I/O,
//! so it builds and tests without the engine and can be fuzzed on its own.

pub mod ast;
pub mod fuzzing;
pub mod grammar;
pub mod lexer;
pub mod nesting;
pub mod parser;
pub mod print;
pub mod visit;

#[cfg(test)]
mod roundtrip_tests;
