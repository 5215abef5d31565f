#!/bin/sh
# quietkv at eddf5fb: cargo build --release -p quietkv-cli --features rocksdb,fjall
exec target/release/quietkv bench --scale full --experiment E2 --hot-keys 7500 --engines quietkv,rocksdb,fjall \
  --modes quietkv:auto,rocksdb:buffered,rocksdb:read-direct,rocksdb:all-direct,fjall:buffered \
  --repeats 3 --max-reruns 2 --dir /var/tmp/bench-scratch --keep-source --out ./out
