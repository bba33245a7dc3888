//! Black-box tests of the real `hedgerow` binary, booted on port 0.
//!
//! One test binary (each links DataFusion again); modules by area.

mod auth;
mod capture;
mod capture_limits;
mod cohorts;
mod durability;
mod flags;
mod funnels;
mod insights;
mod limits;
mod memory;
mod persons;
mod pruning;
mod query;
mod slt;
mod storage;
mod support;
