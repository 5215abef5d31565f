#!/bin/sh
# quietkv built at 4eab8d0: cargo build --release -p quietkv-cli --features rocksdb,fjall
exec target/release/quietkv bench --scale full --experiment E1 --engines quietkv,rocksdb \
  --modes quietkv:auto,quietkv:auto+depth=1,quietkv:auto+nowarm,rocksdb:both-direct \
  --hot-keys 102400 --throttle 700 --repeats 2 --max-reruns 2 --dir /var/tmp/bench-scratch --keep-source --out ./out
