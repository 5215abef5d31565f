//! A sharded, byte-bounded LRU cache for parsed table blocks.
//!
//! Keys are `(table_id, block_offset)`; values are shared `Arc<V>`; each
//! entry is charged the number of bytes the caller states (for blocks: the
//! decompressed size). The total charge never exceeds the capacity: each of
//! the shards owns `capacity / shards` bytes and evicts its least recently
//! used entries to stay within them. Capacity 0 disables the cache.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// The cache the table reader uses.
pub type BlockCache = Cache<crate::table::Block>;

/// `(table_id, block_offset)`.
pub type CacheKey = (u64, u64);

const NIL: usize = usize::MAX;
/// Shards are only split off while each keeps at least this many bytes.
const MIN_SHARD_BYTES: usize = 256 << 10;
const MAX_SHARD_BITS: u32 = 4;

/// Counter snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Bytes the cache may hold (0: no cache).
    pub capacity: u64,
    /// Bytes it holds now.
    pub usage: u64,
    /// Blocks it holds now.
    pub entries: u64,
    /// Lookups that found their block.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Blocks added.
    pub inserts: u64,
    /// Blocks evicted to make room.
    pub evictions: u64,
}

struct Node<V> {
    key: CacheKey,
    value: Option<Arc<V>>,
    charge: usize,
    prev: usize,
    next: usize,
}

/// One LRU list: a slab of nodes linked most- to least-recently used.
struct Shard<V> {
    map: HashMap<CacheKey, usize>,
    nodes: Vec<Node<V>>,
    free: Vec<usize>,
    head: usize,
    tail: usize,
    usage: usize,
    capacity: usize,
}

impl<V> Shard<V> {
    fn new(capacity: usize) -> Self {
        Shard {
            map: HashMap::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            usage: 0,
            capacity,
        }
    }

    fn unlink(&mut self, i: usize) {
        let (prev, next) = (self.nodes[i].prev, self.nodes[i].next);
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next].prev = prev;
        }
        self.nodes[i].prev = NIL;
        self.nodes[i].next = NIL;
    }

    fn push_front(&mut self, i: usize) {
        self.nodes[i].prev = NIL;
        self.nodes[i].next = self.head;
        if self.head != NIL {
            self.nodes[self.head].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    fn remove(&mut self, i: usize) -> usize {
        self.unlink(i);
        let node = &mut self.nodes[i];
        node.value = None;
        self.map.remove(&node.key);
        self.usage -= node.charge;
        let charge = node.charge;
        node.charge = 0;
        self.free.push(i);
        charge
    }

    fn contains(&self, key: &CacheKey) -> bool {
        self.map.contains_key(key)
    }

    fn get(&mut self, key: &CacheKey) -> Option<Arc<V>> {
        let i = *self.map.get(key)?;
        self.unlink(i);
        self.push_front(i);
        self.nodes[i].value.clone()
    }

    /// Returns the number of evicted entries.
    fn insert(&mut self, key: CacheKey, value: Arc<V>, charge: usize) -> u64 {
        if let Some(&i) = self.map.get(&key) {
            self.remove(i);
        }
        let mut evicted = 0;
        while self.usage + charge > self.capacity && self.tail != NIL {
            self.remove(self.tail);
            evicted += 1;
        }
        let node = Node {
            key,
            value: Some(value),
            charge,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i] = node;
                i
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        self.map.insert(key, i);
        self.push_front(i);
        self.usage += charge;
        evicted
    }
}

/// A sharded LRU cache; see the module docs.
pub struct Cache<V> {
    shards: Box<[Mutex<Shard<V>>]>,
    shard_bits: u32,
    capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
    inserts: AtomicU64,
    evictions: AtomicU64,
}

fn mix(table_id: u64, offset: u64) -> u64 {
    let mut h = table_id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ offset;
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}

impl<V> Cache<V> {
    /// A cache of `capacity` bytes (0 = disabled), with up to 16 shards.
    pub fn new(capacity: usize) -> Self {
        let mut bits = 0;
        while bits < MAX_SHARD_BITS && capacity >> (bits + 1) >= MIN_SHARD_BYTES {
            bits += 1;
        }
        Self::with_shard_bits(capacity, bits)
    }

    /// A cache with exactly `2^shard_bits` shards (at most 2^8).
    pub fn with_shard_bits(capacity: usize, shard_bits: u32) -> Self {
        let shard_bits = shard_bits.min(8);
        let n = 1usize << shard_bits;
        let per_shard = capacity / n;
        Cache {
            shards: (0..n).map(|_| Mutex::new(Shard::new(per_shard))).collect(),
            shard_bits,
            capacity,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.capacity > 0
    }

    fn shard(&self, key: &CacheKey) -> &Mutex<Shard<V>> {
        let i = if self.shard_bits == 0 {
            0
        } else {
            (mix(key.0, key.1) >> (64 - self.shard_bits)) as usize
        };
        &self.shards[i]
    }

    /// Whether an entry is cached, without counting or reordering anything
    /// (for a compaction asking what user reads find hot).
    pub fn contains(&self, table_id: u64, offset: u64) -> bool {
        let key = (table_id, offset);
        self.capacity != 0 && self.shard(&key).lock().contains(&key)
    }

    /// Looks up and marks as recently used; counts a hit or a miss.
    pub fn get(&self, table_id: u64, offset: u64) -> Option<Arc<V>> {
        let key = (table_id, offset);
        let found = if self.capacity == 0 {
            None
        } else {
            self.shard(&key).lock().get(&key)
        };
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Inserts (or replaces) an entry charged `charge` bytes, evicting
    /// least recently used entries of its shard as needed. Entries larger
    /// than a shard are not cached.
    pub fn insert(&self, table_id: u64, offset: u64, value: Arc<V>, charge: usize) {
        let key = (table_id, offset);
        let shard = self.shard(&key);
        let mut s = shard.lock();
        if charge > s.capacity {
            return;
        }
        let evicted = s.insert(key, value, charge);
        drop(s);
        self.inserts.fetch_add(1, Ordering::Relaxed);
        if evicted > 0 {
            self.evictions.fetch_add(evicted, Ordering::Relaxed);
        }
    }

    /// Drops every entry of one table (e.g. after the table is deleted).
    pub fn erase_table(&self, table_id: u64) {
        for shard in self.shards.iter() {
            let mut s = shard.lock();
            let victims: Vec<usize> = s
                .map
                .iter()
                .filter(|(k, _)| k.0 == table_id)
                .map(|(_, &i)| i)
                .collect();
            for i in victims {
                s.remove(i);
            }
        }
    }

    /// Current bytes charged.
    pub fn usage(&self) -> usize {
        self.shards.iter().map(|s| s.lock().usage).sum()
    }

    pub fn stats(&self) -> CacheStats {
        let (usage, entries) = self.shards.iter().fold((0, 0), |(u, e), s| {
            let s = s.lock();
            (u + s.usage as u64, e + s.map.len() as u64)
        });
        CacheStats {
            capacity: self.capacity as u64,
            usage,
            entries,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            inserts: self.inserts.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_order_and_byte_bound() {
        let c: Cache<Vec<u8>> = Cache::with_shard_bits(300, 0);
        for i in 0..3 {
            c.insert(1, i, Arc::new(vec![i as u8; 100]), 100);
        }
        assert_eq!(c.usage(), 300);
        assert!(c.get(1, 0).is_some()); // 0 is now most recent
        c.insert(1, 3, Arc::new(vec![]), 100); // evicts 1
        assert!(c.get(1, 1).is_none());
        assert!(c.get(1, 0).is_some());
        assert!(c.get(1, 2).is_some());
        assert!(c.get(1, 3).is_some());
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.inserts, s.evictions), (4, 1, 4, 1));
        assert_eq!((s.usage, s.entries), (300, 3));
        // Too big for the cache: not inserted, nothing evicted.
        c.insert(2, 0, Arc::new(vec![]), 301);
        assert!(c.get(2, 0).is_none());
        assert_eq!(c.usage(), 300);
        // Replacing an entry re-charges it.
        c.insert(1, 3, Arc::new(vec![]), 50);
        assert_eq!(c.usage(), 250);
        c.erase_table(1);
        assert_eq!(c.stats().entries, 0);
        assert_eq!(c.usage(), 0);
    }

    #[test]
    fn disabled_cache_stores_nothing() {
        let c: Cache<u32> = Cache::new(0);
        assert!(!c.is_enabled());
        c.insert(1, 1, Arc::new(5), 1);
        assert!(c.get(1, 1).is_none());
        assert_eq!(c.stats().misses, 1);
        assert_eq!(c.usage(), 0);
    }

    #[test]
    fn sharding_follows_capacity() {
        assert_eq!(Cache::<u8>::new(1 << 20).shards.len(), 4);
        assert_eq!(Cache::<u8>::new(64 << 20).shards.len(), 16);
        assert_eq!(Cache::<u8>::new(1000).shards.len(), 1);
    }

    #[test]
    fn concurrent_use_stays_within_bounds() {
        let cap = 64 * 1024;
        let c: Arc<Cache<Vec<u8>>> = Arc::new(Cache::with_shard_bits(cap, 4));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let c = Arc::clone(&c);
                std::thread::spawn(move || {
                    for i in 0..5000u64 {
                        let key = (i * 7 + t) % 700;
                        match c.get(t % 2, key) {
                            Some(v) => assert_eq!(v.len(), (key % 10) as usize * 100 + 1),
                            None => {
                                let len = (key % 10) as usize * 100 + 1;
                                c.insert(t % 2, key, Arc::new(vec![0; len]), len);
                            }
                        }
                        assert!(c.usage() <= cap);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = c.stats();
        assert!(s.usage <= cap as u64);
        assert!(s.evictions > 0);
        assert_eq!(s.hits + s.misses, 20_000);
        assert!(s.hits > 0);
    }
}
