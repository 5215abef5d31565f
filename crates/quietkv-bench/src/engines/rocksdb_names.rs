//! RocksDB's configuration names, known in every build: the engine
//! experiments default to them whether or not the `rocksdb` feature built
//! the engine, and the engine parses them.

/// The configuration names, in the order the bench runs them by default.
pub const CONFIG_NAMES: [&str; 6] = [
    "buffered",
    "write-direct",
    "read-direct",
    "both-direct",
    "all-direct",
    "seed-all-direct",
];
