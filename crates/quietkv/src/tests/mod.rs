//! Whole-database tests that need the engine's internals: they write or
//! read manifests record by record (a half-created database, a manifest
//! naming another database's tables, the edit a repair must cut at), which
//! the public API deliberately does not offer.

mod creation;
mod identity;
mod repair;
