#!/bin/sh
# quietkv at 1c260d6 (outputs opened as they are written; warming a window at a time within a table):
# cargo build --release -p quietkv-cli --features rocksdb,fjall
exec target/release/quietkv bench --scale full --experiment E1 --engines quietkv,rocksdb \
  --modes quietkv:auto,quietkv:auto+warmwin=64,rocksdb:both-direct,rocksdb:all-direct \
  --hot-keys 102400 --throttle 700 --repeats 3 --max-reruns 3 --dir /var/tmp/bench-scratch --keep-source --out ./out
