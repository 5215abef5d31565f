//! Unit tests that need the crate's internals: installing a snapshot cut short at each step.
