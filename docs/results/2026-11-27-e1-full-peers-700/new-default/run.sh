#!/bin/sh
# quietkv at da24738 (warm_window_bytes 1 MiB by default):
# cargo build --release -p quietkv-cli --features rocksdb,fjall
exec target/release/quietkv bench --scale full --experiment E1 --engines quietkv,rocksdb \
  --modes quietkv:auto,rocksdb:both-direct,rocksdb:all-direct \
  --hot-keys 102400 --throttle 700 --repeats 3 --max-reruns 3 --dir /var/tmp/bench-scratch --keep-source --out ./out
