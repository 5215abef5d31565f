//! The write-ahead log as the database sees it: which WAL files the
//! manifest requires and how long the sealed ones are ([`set`]), when
//! writes to the WAL are made durable ([`policy`]), and the background
//! thread of the periodic policy ([`syncer`]). The record format a WAL is
//! written in (shared with the manifest) is [`crate::record_log`].

pub(crate) mod policy;
pub(crate) mod set;
pub(crate) mod syncer;

pub use policy::WalSync;
pub(crate) use set::{RequiredWal, WalSet};
