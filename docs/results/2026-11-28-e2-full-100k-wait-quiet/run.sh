#!/bin/sh
# Full E2 at H = 100,000, quietkv's default against RocksDB all-direct with the same background bytes, each run waiting for a quiet host first.
cargo build --release -p quietkv-cli --features rocksdb,fjall   # f52fd1f
target/release/quietkv bench --scale full --experiment E2 --hot-keys 100000 --engines quietkv,rocksdb \
  --modes quietkv:auto,rocksdb:all-direct --mode-write-rate quietkv:auto=19 \
  --repeats 3 --max-reruns 10 --wait-quiet 900 --dir /work/bench-scratch/full --keep-source --out .
