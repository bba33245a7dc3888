//! Time is read through a clock the engine is given, so tests can set it.

use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that stands still until moved; for tests.
#[derive(Debug, Clone)]
pub struct FixedClock(Arc<AtomicI64>);

impl FixedClock {
    pub fn new(at: DateTime<Utc>) -> Self {
        Self(Arc::new(AtomicI64::new(at.timestamp_micros())))
    }
    pub fn set(&self, at: DateTime<Utc>) {
        self.0.store(at.timestamp_micros(), Ordering::SeqCst);
    }
}

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_micros(self.0.load(Ordering::SeqCst)).expect("valid micros")
    }
}

pub type SharedClock = Arc<dyn Clock>;
