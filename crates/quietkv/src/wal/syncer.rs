//! The background thread of [`WalSync::Periodic`](crate::WalSync::Periodic):
//! syncs the live WAL every interval, so writes return before they are
//! durable and a power cut loses at most about one interval of them.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::state::Inner;

/// Runs until the database shuts down. A failed sync leaves the WAL in an
/// unknown state, so it becomes the database's background error (writes are
/// refused with its cause, as after a failed synced write) and the thread
/// stops.
pub(crate) fn run(inner: Arc<Inner>, interval: Duration) {
    let mut next = Instant::now() + interval;
    loop {
        {
            let mut st = inner.state.lock();
            // bg_cv also wakes for flush and compaction work; only the
            // deadline or shutdown matter here.
            while !inner.shutting_down.load(Ordering::Acquire) && Instant::now() < next {
                inner.bg_cv.wait_until(&mut st, next);
            }
            if inner.shutting_down.load(Ordering::Acquire) || st.bg_error.is_some() {
                // Close seals (and syncs) the WAL itself.
                return;
            }
        }
        next = Instant::now() + interval;
        // Lock order: state before WAL; the state lock is not held here.
        let synced = {
            let mut wal = inner.wal.lock();
            match wal.as_mut() {
                // Nothing written since the last sync costs nothing.
                Some(w) => w.writer.sync(),
                None => return,
            }
        };
        if let Err(e) = synced {
            let mut st = inner.state.lock();
            inner.set_bg_error(&mut st, &e);
            return;
        }
    }
}
