//! A sharded, byte-bounded, scan-resistant cache of values read from
//! table files, generic over the value: the table reader keeps parsed
//! blocks in one, the table cache open readers in another.
//!
//! Keys are `(table_id, block_offset)`; values are shared `Arc<V>`; each
//! entry is charged the number of bytes the caller states when it inserts
//! it (for blocks: the decompressed size). Capacity 0 disables the cache.
//!
//! Concurrency: the key hash picks one of up to 64 shards, each behind its
//! own short-held mutex, so reader threads only meet when they touch the
//! same shard; counters are relaxed atomics. There is no global lock.
//! Evicted values are released after the shard's lock is let go: the last
//! reference to a block frees its memory, and with the C allocator a free
//! of memory another thread allocated waits for that thread's arena lock.
//! Freed under the shard's lock, one such wait held every reader of the
//! shard (measured: 8 readers on 2 CPUs, a p99 that swung between 40 and
//! 450 us against a median of 4-5).
//!
//! Scan resistance (segmented LRU): a new entry enters the *probation*
//! segment; only a second use moves it to the *protected* segment (at most
//! [`PROTECTED_PERCENT`] of the shard). Eviction takes the least recently
//! used probation entry first. A scan touches each block once, so its
//! blocks pass through probation and leave again without pushing out the
//! blocks point reads use repeatedly. Protected entries pushed out of their
//! segment drop back to probation's head and get another chance.
//!
//! Pinned bytes: memory that lives elsewhere but belongs to the same budget
//! (the index and filter of every open table, held by its reader for as
//! long as the table is open) is [`Cache::reserve`]d: the blocks' room is
//! the capacity minus the pinned bytes, so the cache and what it pins stay
//! within one memory limit together. A cache made
//! [`Cache::without_pinned_charge`] (a size given in bytes of blocks, not a
//! memory budget) only counts them.
//!
//! Why our own and not a crate: quick_cache (sharded, weighted, S3-FIFO-like
//! scan resistance) would fit the hot path, but the engine also needs to
//! drop a deleted table's blocks, to ask "is this block cached" without
//! counting or reordering (compaction warming), reservations charged to the
//! same budget, and exact hit/miss/eviction counters; each would be an
//! adapter around a crate's API, and this is ~400 lines we can test and
//! reason about whole.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// `(table_id, block_offset)`.
pub type CacheKey = (u64, u64);

const NIL: usize = usize::MAX;
/// Shards are only split off while each keeps at least this many bytes.
const MIN_SHARD_BYTES: usize = 256 << 10;
/// Up to 64 shards: with 128 reader threads on a large cache, two threads
/// rarely want the same shard at once.
const MAX_SHARD_BITS: u32 = 6;
/// The protected segment's share of a shard.
pub const PROTECTED_PERCENT: usize = 80;

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
    /// Bytes reserved for memory held elsewhere (index and filter blocks).
    pub pinned: u64,
}

struct Node<V> {
    key: CacheKey,
    value: Option<Arc<V>>,
    charge: usize,
    protected: bool,
    prev: usize,
    next: usize,
}

/// One doubly linked list of slab nodes, most recently used at the head.
#[derive(Clone, Copy)]
struct List {
    head: usize,
    tail: usize,
    usage: usize,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        usage: 0,
    };
}

/// Hashes a block's key in its shard's map. The key is a table id and an
/// offset the database chose itself, not input someone could pick to make
/// keys collide, so the standard library's SipHash (built to resist that)
/// protects nothing here, and it cost about as much as the rest of a cache
/// lookup.
/// The result is [`mix`] rotated: its top bits chose the shard, so they are
/// the same for every key of one map, and the map compares its hashes'
/// top bits first.
#[derive(Default)]
struct BlockKeyHasher {
    words: [u64; 2],
    written: usize,
}

impl Hasher for BlockKeyHasher {
    fn write_u64(&mut self, v: u64) {
        match self.written {
            0 | 1 => self.words[self.written] = v,
            // Not reached for a `CacheKey`; folds further words in.
            _ => self.words[1] = mix(self.words[1], v),
        }
        self.written += 1;
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn finish(&self) -> u64 {
        mix(self.words[0], self.words[1]).rotate_left(32)
    }
}

/// One shard: a slab of nodes in two LRU lists (probation, protected).
struct Shard<V> {
    map: HashMap<CacheKey, usize, BuildHasherDefault<BlockKeyHasher>>,
    nodes: Vec<Node<V>>,
    free: Vec<usize>,
    probation: List,
    protected: List,
    /// Bytes before pinned bytes are taken off.
    capacity: usize,
}

impl<V> Shard<V> {
    fn new(capacity: usize) -> Self {
        Shard {
            map: HashMap::default(),
            nodes: Vec::new(),
            free: Vec::new(),
            probation: List::EMPTY,
            protected: List::EMPTY,
            capacity,
        }
    }

    fn usage(&self) -> usize {
        self.probation.usage + self.protected.usage
    }

    fn list(&mut self, protected: bool) -> &mut List {
        if protected {
            &mut self.protected
        } else {
            &mut self.probation
        }
    }

    fn unlink(&mut self, i: usize) {
        let (prev, next, charge, protected) = {
            let n = &self.nodes[i];
            (n.prev, n.next, n.charge, n.protected)
        };
        if prev != NIL {
            self.nodes[prev].next = next;
        }
        if next != NIL {
            self.nodes[next].prev = prev;
        }
        let l = self.list(protected);
        if l.head == i {
            l.head = next;
        }
        if l.tail == i {
            l.tail = prev;
        }
        l.usage -= charge;
        self.nodes[i].prev = NIL;
        self.nodes[i].next = NIL;
    }

    fn push_front(&mut self, i: usize, protected: bool) {
        let charge = self.nodes[i].charge;
        let l = *self.list(protected);
        self.nodes[i].protected = protected;
        self.nodes[i].prev = NIL;
        self.nodes[i].next = l.head;
        if l.head != NIL {
            self.nodes[l.head].prev = i;
        }
        let l = self.list(protected);
        l.head = i;
        if l.tail == NIL {
            l.tail = i;
        }
        l.usage += charge;
    }

    /// Takes entry `i` out; its value goes to `released`, to be dropped
    /// once the shard's lock is let go.
    fn remove(&mut self, i: usize, released: &mut Released<V>) {
        self.unlink(i);
        let node = &mut self.nodes[i];
        released.push(node.value.take());
        node.charge = 0;
        self.map.remove(&node.key);
        self.free.push(i);
    }

    fn contains(&self, key: &CacheKey) -> bool {
        self.map.contains_key(key)
    }

    /// A use: a probation entry is promoted, a protected one refreshed.
    fn get(&mut self, key: &CacheKey, room: usize) -> Option<Arc<V>> {
        let i = *self.map.get(key)?;
        self.unlink(i);
        self.push_front(i, true);
        // Keep the protected segment within its share: its least recently
        // used entries drop back to probation (most recent end).
        let protected_cap = room / 100 * PROTECTED_PERCENT;
        while self.protected.usage > protected_cap && self.protected.tail != i {
            let t = self.protected.tail;
            self.unlink(t);
            self.push_front(t, false);
        }
        self.nodes[i].value.clone()
    }

    /// Evicts until `extra` more bytes fit in `room` (the values into
    /// `released`); returns how many.
    fn make_room(&mut self, extra: usize, room: usize, released: &mut Released<V>) -> u64 {
        let mut evicted = 0;
        while self.usage() + extra > room {
            let victim = if self.probation.tail != NIL {
                self.probation.tail
            } else if self.protected.tail != NIL {
                self.protected.tail
            } else {
                break;
            };
            self.remove(victim, released);
            evicted += 1;
        }
        evicted
    }

    /// Inserts into probation; returns the number of evicted entries
    /// (their values, and a replaced one's, into `released`).
    fn insert(
        &mut self,
        key: CacheKey,
        value: Arc<V>,
        charge: usize,
        room: usize,
        released: &mut Released<V>,
    ) -> u64 {
        if let Some(&i) = self.map.get(&key) {
            self.remove(i, released);
        }
        let evicted = self.make_room(charge, room, released);
        let node = Node {
            key,
            value: Some(value),
            charge,
            protected: false,
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
        self.push_front(i, false);
        evicted
    }
}

/// Values taken out of a shard under its lock, dropped by the caller
/// after letting the lock go. An insert usually evicts one or two blocks:
/// those fit without an allocation.
struct Released<V> {
    few: [Option<Arc<V>>; 4],
    len: usize,
    more: Vec<Arc<V>>,
}

impl<V> Released<V> {
    fn new() -> Self {
        Released {
            few: [const { None }; 4],
            len: 0,
            more: Vec::new(),
        }
    }

    fn push(&mut self, value: Option<Arc<V>>) {
        let Some(v) = value else { return };
        if self.len < self.few.len() {
            self.few[self.len] = Some(v);
            self.len += 1;
        } else {
            self.more.push(v);
        }
    }
}

/// A sharded segmented-LRU cache; see the module docs.
pub struct Cache<V> {
    shards: Box<[Mutex<Shard<V>>]>,
    shard_bits: u32,
    capacity: usize,
    pinned: AtomicUsize,
    charge_pinned: bool,
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

/// Bytes pinned against a cache's budget, given back on drop.
pub struct Reservation<V> {
    cache: Arc<Cache<V>>,
    bytes: usize,
}

impl<V> Reservation<V> {
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl<V> Drop for Reservation<V> {
    fn drop(&mut self) {
        self.cache.pinned.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl<V> Cache<V> {
    /// A cache of `capacity` bytes (0 = disabled), with up to 64 shards.
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
            pinned: AtomicUsize::new(0),
            charge_pinned: true,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// Pinned bytes are counted but leave the blocks' room alone: for a
    /// capacity that means bytes of blocks rather than a memory budget.
    pub fn without_pinned_charge(mut self) -> Self {
        self.charge_pinned = false;
        self
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

    /// A shard's room for blocks: its share of the capacity minus its
    /// share of the pinned bytes.
    fn room(&self, shard: &Shard<V>) -> usize {
        if !self.charge_pinned {
            return shard.capacity;
        }
        let pinned = self.pinned.load(Ordering::Relaxed) >> self.shard_bits;
        shard.capacity.saturating_sub(pinned)
    }

    /// Whether an entry is cached, without counting or reordering anything
    /// (for a compaction asking what user reads find hot).
    pub fn contains(&self, table_id: u64, offset: u64) -> bool {
        let key = (table_id, offset);
        self.capacity != 0 && self.shard(&key).lock().contains(&key)
    }

    /// Looks up and marks as used (a second use protects the entry);
    /// counts a hit or a miss.
    pub fn get(&self, table_id: u64, offset: u64) -> Option<Arc<V>> {
        let key = (table_id, offset);
        let found = if self.capacity == 0 {
            None
        } else {
            let mut s = self.shard(&key).lock();
            let room = self.room(&s);
            s.get(&key, room)
        };
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Inserts (or replaces) an entry charged `charge` bytes into the
    /// probation segment, evicting as needed. Entries larger than a
    /// shard's room are not cached.
    pub fn insert(&self, table_id: u64, offset: u64, value: Arc<V>, charge: usize) {
        let key = (table_id, offset);
        let shard = self.shard(&key);
        let mut released = Released::new();
        let mut s = shard.lock();
        let room = self.room(&s);
        if charge > room {
            return;
        }
        let evicted = s.insert(key, value, charge, room, &mut released);
        drop(s);
        drop(released);
        self.inserts.fetch_add(1, Ordering::Relaxed);
        if evicted > 0 {
            self.evictions.fetch_add(evicted, Ordering::Relaxed);
        }
    }

    /// Pins `bytes` of memory held elsewhere against this cache's budget
    /// until the returned reservation is dropped; blocks are evicted at
    /// once to make the room. A disabled cache reserves nothing.
    pub fn reserve(self: &Arc<Self>, bytes: usize) -> Reservation<V> {
        let bytes = if self.capacity == 0 { 0 } else { bytes };
        self.pinned.fetch_add(bytes, Ordering::Relaxed);
        if bytes > 0 && self.charge_pinned {
            let mut evicted = 0;
            for shard in self.shards.iter() {
                let mut released = Released::new();
                let mut s = shard.lock();
                let room = self.room(&s);
                evicted += s.make_room(0, room, &mut released);
                drop(s);
                drop(released);
            }
            if evicted > 0 {
                self.evictions.fetch_add(evicted, Ordering::Relaxed);
            }
        }
        Reservation {
            cache: Arc::clone(self),
            bytes,
        }
    }

    /// Bytes currently pinned by reservations.
    pub fn pinned(&self) -> usize {
        self.pinned.load(Ordering::Relaxed)
    }

    /// Drops every entry of one table (e.g. after the table is deleted).
    pub fn erase_table(&self, table_id: u64) {
        for shard in self.shards.iter() {
            let mut released = Released::new();
            let mut s = shard.lock();
            let victims: Vec<usize> = s
                .map
                .iter()
                .filter(|(k, _)| k.0 == table_id)
                .map(|(_, &i)| i)
                .collect();
            for i in victims {
                s.remove(i, &mut released);
            }
            drop(s);
            drop(released);
        }
    }

    /// Current bytes charged.
    pub fn usage(&self) -> usize {
        self.shards.iter().map(|s| s.lock().usage()).sum()
    }

    pub fn stats(&self) -> CacheStats {
        let (usage, entries) = self.shards.iter().fold((0, 0), |(u, e), s| {
            let s = s.lock();
            (u + s.usage() as u64, e + s.map.len() as u64)
        });
        CacheStats {
            capacity: self.capacity as u64,
            usage,
            entries,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            inserts: self.inserts.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            pinned: self.pinned() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The map's hash must spread the keys one shard holds (which all share
    /// the top bits of `mix`) over both the bits the map compares first
    /// (the top 7) and the ones that pick a bucket (the low ones).
    #[test]
    fn block_keys_of_one_shard_hash_apart() {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let build = BuildHasherDefault::<BlockKeyHasher>::default();
        let shard_bits = 6;
        let mut top = std::collections::HashSet::new();
        let mut low = std::collections::HashSet::new();
        let mut keys = 0;
        for table in 1..=20u64 {
            for block in 0..20_000u64 {
                let key: CacheKey = (table, block * 4096);
                if mix(key.0, key.1) >> (64 - shard_bits) != 5 {
                    continue;
                }
                let h = build.hash_one(key);
                top.insert(h >> 57);
                low.insert(h & 1023);
                keys += 1;
            }
        }
        assert!(keys > 5_000, "{keys} keys in the shard");
        assert_eq!(
            top.len(),
            128,
            "top 7 bits take {} of 128 values",
            top.len()
        );
        assert!(
            low.len() > 1000,
            "low 10 bits take {} of 1024 values",
            low.len()
        );
    }

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
        assert_eq!(Cache::<u8>::new(4 << 20).shards.len(), 16);
        assert_eq!(Cache::<u8>::new(64 << 20).shards.len(), 64);
        assert_eq!(Cache::<u8>::new(1000).shards.len(), 1);
    }

    #[test]
    fn a_scan_does_not_flush_blocks_used_twice() {
        let c: Cache<u32> = Cache::with_shard_bits(1000, 0);
        // A hot set of 5 blocks, each used twice: protected.
        for k in 0..5 {
            c.insert(1, k, Arc::new(k as u32), 100);
            assert!(c.get(1, k).is_some());
        }
        // A scan ten times the cache, each block used once.
        for k in 0..100 {
            if c.get(2, k).is_none() {
                c.insert(2, k, Arc::new(0), 100);
            }
        }
        for k in 0..5 {
            assert!(
                c.get(1, k).is_some(),
                "hot block {k} was flushed by the scan"
            );
        }
        assert!(c.usage() <= 1000);
        // Plain LRU would have kept only the scan's last blocks.
        assert!(c.get(2, 0).is_none());
    }

    #[test]
    fn protected_segment_keeps_to_its_share_and_demotes_to_probation() {
        let c: Cache<u32> = Cache::with_shard_bits(1000, 0);
        for k in 0..10 {
            c.insert(1, k, Arc::new(0), 100);
            c.get(1, k);
        }
        let s = c.shards[0].lock();
        assert_eq!(s.protected.usage, 800);
        assert_eq!(s.probation.usage, 200);
        drop(s);
        // The demoted (least recently used) ones go first.
        c.insert(1, 99, Arc::new(0), 100);
        assert!(!c.contains(1, 0));
        assert!(c.contains(1, 9));
    }

    #[test]
    fn reservations_take_room_from_blocks_and_give_it_back() {
        let c: Arc<Cache<u32>> = Arc::new(Cache::with_shard_bits(1000, 0));
        for k in 0..10 {
            c.insert(1, k, Arc::new(0), 100);
        }
        assert_eq!(c.usage(), 1000);
        let r = c.reserve(400);
        assert_eq!(r.bytes(), 400);
        // Blocks were evicted at once to make the room.
        assert_eq!(c.usage(), 600);
        assert_eq!(c.stats().pinned, 400);
        for k in 10..20 {
            c.insert(1, k, Arc::new(0), 100);
        }
        assert_eq!(c.usage(), 600);
        drop(r);
        assert_eq!(c.pinned(), 0);
        for k in 20..30 {
            c.insert(1, k, Arc::new(0), 100);
        }
        assert_eq!(c.usage(), 1000);
        // Pinning more than the capacity leaves no room, and never panics.
        let big = c.reserve(5000);
        assert_eq!(c.usage(), 0);
        c.insert(1, 0, Arc::new(0), 1);
        assert_eq!(c.usage(), 0);
        drop(big);
        // Counted only, where the capacity is bytes of blocks.
        let plain: Arc<Cache<u32>> =
            Arc::new(Cache::with_shard_bits(1000, 0).without_pinned_charge());
        let r = plain.reserve(600);
        plain.insert(1, 0, Arc::new(0), 1000);
        assert_eq!((plain.usage(), plain.stats().pinned), (1000, 600));
        drop(r);
        // A disabled cache reserves nothing.
        let off: Arc<Cache<u32>> = Arc::new(Cache::new(0));
        assert_eq!(off.reserve(10).bytes(), 0);
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

    /// A value that, when dropped, looks whether its cache's shard is
    /// locked (the cache has one shard).
    struct Probe {
        cache: Arc<std::sync::OnceLock<std::sync::Weak<Cache<Probe>>>>,
        dropped_under_lock: Arc<AtomicU64>,
        drops: Arc<AtomicU64>,
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::Relaxed);
            if let Some(c) = self.cache.get().and_then(|w| w.upgrade()) {
                if c.shards[0].try_lock().is_none() {
                    self.dropped_under_lock.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    #[test]
    fn evicted_values_are_dropped_after_the_lock_is_let_go() {
        let c: Arc<Cache<Probe>> = Arc::new(Cache::with_shard_bits(1000, 0));
        let slot = Arc::new(std::sync::OnceLock::new());
        slot.set(Arc::downgrade(&c)).unwrap();
        let under = Arc::new(AtomicU64::new(0));
        let drops = Arc::new(AtomicU64::new(0));
        let probe = || {
            Arc::new(Probe {
                cache: slot.clone(),
                dropped_under_lock: under.clone(),
                drops: drops.clone(),
            })
        };
        // Evictions by inserts: ten entries of 300 bytes in 1,000.
        for i in 0..10 {
            c.insert(1, i, probe(), 300);
        }
        // A replaced entry.
        c.insert(1, 9, probe(), 300);
        // Evictions by a reservation, then a deleted table's entries.
        c.insert(2, 0, probe(), 100);
        let r = c.reserve(800);
        drop(r);
        c.insert(3, 0, probe(), 100);
        c.insert(3, 1, probe(), 100);
        c.erase_table(3);
        assert!(drops.load(Ordering::Relaxed) >= 10, "entries were evicted");
        assert_eq!(under.load(Ordering::Relaxed), 0, "dropped under the lock");
    }
}
