//! The one guard on nesting, shared by the parser, the printer and the engine's planner.
//!
//! A [`Nesting`] counts levels against a bound and refuses the level past it. [`deeper`]
//! runs one level of a recursive descent under that count and, every [`SEGMENT`] levels,
//! continues the descent on a fresh thread with its own stack, so a tree as deep as the
//! bound allows cannot exhaust the caller's stack whatever the build's frame sizes.

/// Levels of recursion run on one stack before the descent moves to a fresh one.
pub const SEGMENT: usize = 16;

/// The stack of each fresh segment (virtual memory; only what is touched is committed).
pub const SEGMENT_STACK: usize = 16 << 20;

/// A depth count with a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nesting {
    depth: usize,
    limit: usize,
}

/// A level past the bound was refused (or no thread could be started for a new segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep {
    /// The bound that was reached.
    pub limit: usize,
}

impl Nesting {
    /// No levels entered yet; at most `limit` may be.
    pub const fn new(limit: usize) -> Self {
        Self { depth: 0, limit }
    }

    /// Levels entered now.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The most levels that may be entered.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Enters one level, or refuses it past the bound (and then nothing changes).
    pub fn enter(&mut self) -> Result<(), TooDeep> {
        if self.depth >= self.limit {
            return Err(TooDeep { limit: self.limit });
        }
        self.depth += 1;
        Ok(())
    }

    /// Leaves a level entered by [`Nesting::enter`].
    pub fn leave(&mut self) {
        debug_assert!(self.depth > 0, "left a level that was never entered");
        self.depth = self.depth.saturating_sub(1);
    }
}

/// A recursive walker that keeps its [`Nesting`].
pub trait Nested: Send {
    /// The walker's count.
    fn nesting(&mut self) -> &mut Nesting;
}

/// Runs `f` one level deeper in `walker`: refused past the bound; on a fresh stack every
/// [`SEGMENT`] levels.
pub fn deeper<W: Nested, T: Send>(
    walker: &mut W,
    f: impl FnOnce(&mut W) -> T + Send,
) -> Result<T, TooDeep> {
    walker.nesting().enter()?;
    let depth = walker.nesting().depth();
    let r = if depth.is_multiple_of(SEGMENT) {
        let limit = walker.nesting().limit();
        std::thread::scope(|scope| {
            let spawned = std::thread::Builder::new()
                .name("hogql-nested".into())
                .stack_size(SEGMENT_STACK)
                .spawn_scoped(scope, || f(walker));
            match spawned {
                Ok(handle) => Ok(handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))),
                Err(_) => Err(TooDeep { limit }),
            }
        })
    } else {
        Ok(f(walker))
    };
    walker.nesting().leave();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Walker(Nesting);
    impl Nested for Walker {
        fn nesting(&mut self) -> &mut Nesting {
            &mut self.0
        }
    }

    fn descend(w: &mut Walker, levels: usize) -> Result<usize, TooDeep> {
        if levels == 0 {
            return Ok(w.0.depth());
        }
        deeper(w, |w| descend(w, levels - 1))?
    }

    #[test]
    fn counts_levels_and_refuses_past_the_bound() {
        let mut w = Walker(Nesting::new(100));
        assert_eq!(descend(&mut w, 100), Ok(100));
        assert_eq!(w.0.depth(), 0, "every level is left again");
        assert_eq!(descend(&mut w, 101), Err(TooDeep { limit: 100 }));
        assert_eq!(w.0.depth(), 0, "a refusal leaves the count as it was");
    }

    #[test]
    fn deep_descent_moves_to_fresh_stacks() {
        // A frame of 32 KiB times 2 000 levels is 64 MiB: far more than a test thread's
        // stack, fine in 16-level segments.
        fn heavy(w: &mut Walker, levels: usize) -> Result<u8, TooDeep> {
            let pad = std::hint::black_box([levels as u8; 32 << 10]);
            if levels == 0 {
                return Ok(pad[0]);
            }
            Ok(deeper(w, |w| heavy(w, levels - 1))?? ^ pad[1])
        }
        let mut w = Walker(Nesting::new(4_000));
        assert!(heavy(&mut w, 2_000).is_ok());
    }
}
