//! openraft's own storage test suite, run against quietkv-raft's log store
//! and state machine: every check openraft ships for a storage
//! implementation (log reads, truncate, purge, vote, applied state,
//! membership, snapshot build and transfer) on a fresh store each.

use openraft::testing::{StoreBuilder, Suite};
use quietkv_raft::{LogStore, StateMachine, StorageError, Store, TypeConfig};
use tempfile::TempDir;

/// A fresh store in its own temporary directory, removed when the suite
/// drops the guard.
struct FreshStore;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for FreshStore {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = Store::open(dir.path())?;
        let sm = store.state_machine()?;
        Ok((dir, store.log_store(), sm))
    }
}

#[test]
fn openraft_storage_suite_passes() {
    if let Err(e) = Suite::test_all(FreshStore) {
        panic!("openraft's storage suite failed: {e}");
    }
}
