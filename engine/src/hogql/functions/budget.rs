//! Output size of the functions whose result can be far larger than their input
//! (`repeat`, the pads, `concat`, the replaces, `toJSONString`, …): checked before the
//! bytes are allocated, and counted against the query memory pool while a batch is built.
//!
//! Three bounds, each a clear error rather than an abort or an overflow:
//! - ClickHouse's own per-call limits where it has them (`repeat` at most 1 000 000 times,
//!   a padded length at most 1 000 000), with its messages;
//! - at most `MAX_BATCH_BYTES` of output per call per batch of rows, under Arrow's 2 GiB
//!   offset limit for one string array (past it Arrow fails with an offset overflow);
//! - the query memory pool: on query threads ([`install_pool`]) each call reserves its
//!   output in the pool before building it, so strings count against `--query-memory-limit`
//!   like every other operator's memory (`query_memory_limit` when over).

use std::cell::RefCell;
use std::sync::Arc;

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};

/// ClickHouse's `max_repeat_times` (`repeat`).
pub(crate) const MAX_REPEAT: i64 = 1_000_000;
/// ClickHouse's largest padded length (`leftPad`, `rightPad` and their UTF-8 forms).
pub(crate) const MAX_PAD_LENGTH: i64 = 1_000_000;
/// The most bytes one call produces for one batch of rows.
pub(crate) const MAX_BATCH_BYTES: usize = 1 << 30;

thread_local! {
    static POOL: RefCell<Option<Arc<dyn MemoryPool>>> = const { RefCell::new(None) };
}

/// Makes `pool` the pool that function output on this thread is counted against (called on
/// each thread of the query runtime when it starts).
pub fn install_pool(pool: Arc<dyn MemoryPool>) {
    POOL.with(|p| *p.borrow_mut() = Some(pool));
}

/// The output of one call over one batch, accounted as it grows.
pub(crate) struct Output {
    name: String,
    used: usize,
    reservation: Option<MemoryReservation>,
}

/// The pool is asked in steps of this much, not once per row.
const STEP: usize = 1 << 20;

impl Output {
    pub(crate) fn new(name: &str) -> Self {
        let reservation = POOL.with(|p| {
            p.borrow()
                .as_ref()
                .map(|pool| MemoryConsumer::new(format!("hogql {name}")).register(pool))
        });
        Self {
            name: name.to_string(),
            used: 0,
            reservation,
        }
    }

    /// Accounts for `bytes` more output; call it before allocating them.
    pub(crate) fn take(&mut self, bytes: usize) -> Result<()> {
        self.used = self.used.saturating_add(bytes);
        if self.used > MAX_BATCH_BYTES {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "{} would produce more than {} MiB for one batch of rows",
                self.name,
                MAX_BATCH_BYTES >> 20
            )));
        }
        if let Some(r) = &mut self.reservation
            && self.used > r.size()
        {
            let needed = self.used - r.size();
            // Ahead by a step when the pool has room, so the pool is not asked every row.
            if r.try_grow(needed.max(STEP)).is_err() {
                r.try_grow(needed).map_err(|e| {
                    DataFusionError::ResourcesExhausted(format!(
                        "{} needs {} more bytes for its result: {}",
                        self.name,
                        bytes,
                        e.find_root()
                    ))
                })?;
            }
        }
        Ok(())
    }
}

/// Bytes a function's value adds to its output (0 for fixed-size values, which cannot grow).
pub(crate) trait OutBytes {
    fn out_bytes(&self) -> usize;
}

impl OutBytes for String {
    fn out_bytes(&self) -> usize {
        self.len()
    }
}

impl OutBytes for Vec<String> {
    fn out_bytes(&self) -> usize {
        self.iter().map(|s| s.len() + 4).sum()
    }
}

macro_rules! fixed_size {
    ($($t:ty),*) => {$(
        impl OutBytes for $t {
            fn out_bytes(&self) -> usize {
                0
            }
        }
    )*};
}
fixed_size!(bool, u8, u64, i64, f64);

/// ClickHouse's check of `repeat`'s count.
pub(crate) fn check_repeat(times: i64) -> Result<()> {
    if times > MAX_REPEAT {
        return Err(DataFusionError::Execution(format!(
            "Too many times to repeat ({times}), maximum is: {MAX_REPEAT}"
        )));
    }
    Ok(())
}

/// ClickHouse's check of a padded length.
pub(crate) fn check_pad(length: i64) -> Result<()> {
    if length > MAX_PAD_LENGTH {
        return Err(DataFusionError::Execution(format!(
            "New padded length ({length}) is too big, maximum is: {MAX_PAD_LENGTH}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::memory_pool::GreedyMemoryPool;

    #[test]
    fn output_is_bounded_per_batch_and_by_the_pool() {
        let mut out = Output::new("repeat");
        out.take(MAX_BATCH_BYTES).unwrap();
        let e = out.take(1).unwrap_err();
        assert!(matches!(e, DataFusionError::ResourcesExhausted(_)), "{e}");

        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1000));
        std::thread::spawn(move || {
            install_pool(pool.clone());
            {
                let mut out = Output::new("concat");
                out.take(600).unwrap();
                assert_eq!(pool.reserved(), 600);
                let e = out.take(600).unwrap_err().to_string();
                assert!(e.contains("concat needs 600 more bytes"), "{e}");
            }
            // Given back when the call is done.
            assert_eq!(pool.reserved(), 0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn clickhouse_limits() {
        assert!(check_repeat(MAX_REPEAT).is_ok());
        assert!(check_repeat(MAX_REPEAT + 1).is_err());
        assert!(check_pad(MAX_PAD_LENGTH).is_ok());
        let e = check_pad(1_000_000_000_000).unwrap_err().to_string();
        assert!(
            e.contains("New padded length (1000000000000) is too big"),
            "{e}"
        );
    }
}
