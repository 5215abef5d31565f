//! What quietio keeps between files for reuse (huge direct buffers, idle
//! io_uring rings): a process-wide list, oldest first, with a limit on the
//! total weight it holds. The newest are kept when it is over the limit,
//! since they have the sizes in use now. Items leave the list, evicted or
//! released, and are dropped outside its lock.

use std::sync::{Mutex, MutexGuard};

pub(crate) struct Kept<K, T> {
    items: Mutex<Vec<(K, usize, T)>>,
    limit: usize,
}

impl<K: PartialEq, T> Kept<K, T> {
    /// Holds up to `limit` in total weight.
    pub(crate) const fn new(limit: usize) -> Self {
        Kept {
            items: Mutex::new(Vec::new()),
            limit,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(K, usize, T)>> {
        // A panic elsewhere leaves the list itself intact.
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The oldest kept item with this key, if any.
    pub(crate) fn take(&self, key: &K) -> Option<T> {
        let mut items = self.lock();
        let i = items.iter().position(|(k, _, _)| k == key)?;
        // `remove`, not `swap_remove`: the list stays oldest first.
        Some(items.remove(i).2)
    }

    /// Keeps `item`, evicting the oldest items beyond the limit.
    pub(crate) fn keep(&self, key: K, weight: usize, item: T) {
        let mut evicted = Vec::new();
        {
            let mut items = self.lock();
            items.push((key, weight, item));
            let mut total: usize = items.iter().map(|(_, w, _)| w).sum();
            while total > self.limit {
                let oldest = items.remove(0);
                total -= oldest.1;
                evicted.push(oldest);
            }
        }
        drop(evicted);
    }

    /// Drops everything kept.
    pub(crate) fn release(&self) {
        let all = std::mem::take(&mut *self.lock());
        drop(all);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_within_the_limit_and_takes_by_key() {
        let k: Kept<u32, &str> = Kept::new(10);
        k.keep(1, 4, "a");
        k.keep(2, 4, "b");
        k.keep(1, 4, "c"); // 12 > 10: "a", the oldest, goes.
        assert_eq!(k.take(&1), Some("c"));
        assert_eq!(k.take(&1), None);
        assert_eq!(k.take(&2), Some("b"));
        k.keep(3, 1, "d");
        k.release();
        assert_eq!(k.take(&3), None);
    }
}
