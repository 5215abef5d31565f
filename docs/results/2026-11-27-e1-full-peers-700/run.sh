#!/bin/sh
# quietkv built at 4eab8d0: cargo build --release -p quietkv-cli --features rocksdb,fjall
# 700 MiB/s: about RocksDB's unthrottled rate in the run before (714 MiB/s for both-direct).
exec target/release/quietkv bench --scale full --experiment E1 --engines quietkv,rocksdb \
  --modes quietkv:auto,rocksdb:both-direct,rocksdb:all-direct \
  --hot-keys 102400 --throttle 700 --repeats 3 --max-reruns 3 --dir /var/tmp/bench-scratch --keep-source --out ./out
