//! See [the module docs](super).
