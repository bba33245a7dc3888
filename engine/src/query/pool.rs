//! The query memory pool: DataFusion's fair spilling pool, with a guaranteed share for the
//! operators that cannot spill.
//!
//! Under a plain `FairSpillPool`, spilling operators (sorts, hash aggregations) may fill the
//! whole pool between them; the operator that then merges their sorted output
//! (`SortPreservingMergeExec`, which cannot spill) finds nothing left and the query fails
//! although every sort spilled as it should. Here spilling operators together hold at most
//! three quarters of the pool, so at least a quarter stays for the rest; operators that
//! cannot spill may still use the whole pool when nothing else holds it.

use std::fmt;
use std::sync::Mutex;

use datafusion::common::{Result, resources_datafusion_err};
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};

/// DataFusion's `FairSpillPool` rule, with the memory open to spilling operators capped at
/// three quarters of the pool: each spilling operator may hold an equal share of
/// `min(cap, size - held by non-spilling operators)`; a non-spilling operator may have
/// whatever is not held.
#[derive(Debug)]
pub(crate) struct HeadroomPool {
    size: usize,
    spill_cap: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Spilling consumers registered.
    spillers: usize,
    spillable: usize,
    unspillable: usize,
}

impl HeadroomPool {
    pub(crate) fn new(size: usize) -> Self {
        Self {
            size,
            spill_cap: size / 4 * 3,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl fmt::Display for HeadroomPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state();
        write!(
            f,
            "query memory pool of {} bytes ({} held by {} spilling operators, at most {}; {} by \
             others)",
            self.size, st.spillable, st.spillers, self.spill_cap, st.unspillable
        )
    }
}

impl MemoryPool for HeadroomPool {
    fn name(&self) -> &str {
        "hedgerow"
    }

    fn register(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            self.state().spillers += 1;
        }
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        if consumer.can_spill() {
            let mut st = self.state();
            st.spillers = st.spillers.saturating_sub(1);
        }
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        let mut st = self.state();
        if reservation.consumer().can_spill() {
            st.spillable += additional;
        } else {
            st.unspillable += additional;
        }
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        let mut st = self.state();
        if reservation.consumer().can_spill() {
            st.spillable = st.spillable.saturating_sub(shrink);
        } else {
            st.unspillable = st.unspillable.saturating_sub(shrink);
        }
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        let mut st = self.state();
        let available = if reservation.consumer().can_spill() {
            let open = self.spill_cap.min(self.size.saturating_sub(st.unspillable));
            open.checked_div(st.spillers).unwrap_or(open)
        } else {
            self.size
                .saturating_sub(st.unspillable + st.spillable)
                .saturating_add(reservation.size())
        };
        if reservation.size() + additional > available {
            return Err(resources_datafusion_err!(
                "Failed to allocate additional {additional} bytes for {} holding {}: {} bytes \
                 are open to it in the {}",
                reservation.consumer().name(),
                reservation.size(),
                available,
                {
                    drop(st);
                    self.to_string()
                }
            ));
        }
        if reservation.consumer().can_spill() {
            st.spillable += additional;
        } else {
            st.unspillable += additional;
        }
        Ok(())
    }

    fn reserved(&self) -> usize {
        let st = self.state();
        st.spillable + st.unspillable
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn spilling_operators_leave_a_quarter_for_the_others() {
        let pool: Arc<dyn MemoryPool> = Arc::new(HeadroomPool::new(1000));
        let sort_a = MemoryConsumer::new("sort a")
            .with_can_spill(true)
            .register(&pool);
        let sort_b = MemoryConsumer::new("sort b")
            .with_can_spill(true)
            .register(&pool);
        let merge = MemoryConsumer::new("merge").register(&pool);
        // Each spiller gets its fair share of 750.
        sort_a.try_grow(375).unwrap();
        sort_b.try_grow(375).unwrap();
        assert!(sort_a.try_grow(1).is_err());
        // The merge still finds its quarter.
        merge.try_grow(250).unwrap();
        assert!(merge.try_grow(1).is_err());
        // Freed spilling memory is usable again, by anyone.
        sort_a.shrink(375);
        merge.try_grow(300).unwrap();
        assert_eq!(pool.reserved(), 925);
        // A refused grow leaves the books as they were.
        assert!(sort_b.try_grow(500).is_err());
        sort_b.free();
        merge.free();
        assert_eq!(pool.reserved(), 0);
        // Shares follow the spillers registered: two, so 375 each.
        assert!(sort_a.try_grow(376).is_err());
        sort_a.try_grow(375).unwrap();
    }
}
