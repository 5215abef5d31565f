#!/bin/sh
# quietkv built at 4eab8d0: cargo build --release -p quietkv-cli --features rocksdb,fjall
exec target/release/quietkv bench --scale full --experiment E1 --engines quietkv,rocksdb,fjall \
  --modes quietkv:auto,quietkv:both-direct,rocksdb:buffered,rocksdb:write-direct,rocksdb:read-direct,rocksdb:both-direct,rocksdb:all-direct,rocksdb:seed-all-direct,fjall:buffered \
  --hot-keys 102400 --throttle 0 --repeats 3 --max-reruns 3 --dir /var/tmp/bench-scratch --out ./out
