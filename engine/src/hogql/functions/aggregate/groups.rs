//! The bookkeeping our groups accumulators share: one state per group, and the heap bytes
//! of all of them kept up to date as states change (summing them per batch would cost a
//! pass over every group).

use datafusion::logical_expr::EmitTo;

/// The heap bytes a group's state holds, beyond its own size.
pub(super) trait HeapSize {
    fn heap_size(&self) -> usize;
}

/// One `T` per group, with their heap bytes.
pub(super) struct GroupStates<T> {
    states: Vec<T>,
    bytes: usize,
}

impl<T> Default for GroupStates<T> {
    fn default() -> Self {
        GroupStates {
            states: Vec::new(),
            bytes: 0,
        }
    }
}

impl<T: HeapSize + Default> GroupStates<T> {
    /// Makes room for `n` groups (new ones get `T::default()`).
    pub(super) fn resize(&mut self, n: usize) {
        self.states.resize_with(n, T::default);
    }

    /// `group`'s state.
    pub(super) fn get(&self, group: usize) -> &T {
        &self.states[group]
    }

    /// Runs `f` on `group`'s state and counts what it changed in the heap.
    pub(super) fn update<R>(&mut self, group: usize, f: impl FnOnce(&mut T) -> R) -> R {
        let state = &mut self.states[group];
        let before = state.heap_size();
        let out = f(state);
        self.bytes = self.bytes + state.heap_size() - before;
        out
    }

    /// The states `emit_to` asks for, taken out.
    pub(super) fn take(&mut self, emit_to: EmitTo) -> Vec<T> {
        let taken = emit_to.take_needed(&mut self.states);
        self.bytes -= taken.iter().map(HeapSize::heap_size).sum::<usize>();
        taken
    }

    /// The memory held: the states and their heap bytes.
    pub(super) fn size(&self) -> usize {
        self.bytes + self.states.capacity() * size_of::<T>()
    }

    /// The heap bytes alone.
    #[cfg(test)]
    pub(super) fn heap_bytes(&self) -> usize {
        self.bytes
    }
}
