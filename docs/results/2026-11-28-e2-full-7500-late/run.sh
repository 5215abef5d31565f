#!/bin/sh
# Full E2 at H = 7,500, quietkv's default against RocksDB all-direct with the same background bytes.
cargo build --release -p quietkv-cli --features rocksdb,fjall   # d8646ca
../2026-11-28-e2-full-host-steal/probe.sh probes.txt            # the host's state first
target/release/quietkv bench --scale full --experiment E2 --hot-keys 7500 --engines quietkv,rocksdb \
  --modes quietkv:auto,rocksdb:all-direct --mode-write-rate quietkv:auto=19 \
  --repeats 3 --max-reruns 10 --dir /work/bench-scratch/full --keep-source --out .
