//! The hedgerow binary's library: command line, configuration, and the HTTP layer.
//!
//! Thin by design: handlers decode a request, make one engine call and encode the answer.
//! No query or storage logic lives here.

pub mod cli;
pub mod config;
pub mod error;
pub mod http;
