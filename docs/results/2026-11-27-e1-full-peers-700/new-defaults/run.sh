#!/bin/sh
# quietkv at 6b8cd6c (64 KiB warm window, one request in flight for a rate-limited full compaction, by default):
# cargo build --release -p quietkv-cli --features rocksdb,fjall
exec target/release/quietkv bench --scale full --experiment E1 --engines quietkv,rocksdb \
  --modes quietkv:auto,rocksdb:all-direct \
  --hot-keys 102400 --throttle 700 --repeats 3 --max-reruns 2 --dir /var/tmp/bench-scratch --keep-source --out ./out
