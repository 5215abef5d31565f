#!/bin/sh
# quietkv at 68fb0f8 (warming counts a page-cached block hot only if a user read fetched it):
# cargo build --release -p quietkv-cli --features rocksdb,fjall
exec target/release/quietkv bench --scale full --experiment E1 --engines quietkv,rocksdb \
  --modes quietkv:auto,quietkv:auto+nowarm,rocksdb:both-direct,rocksdb:all-direct \
  --hot-keys 102400 --throttle 700 --repeats 3 --max-reruns 3 --dir /var/tmp/bench-scratch --keep-source --out ./out
