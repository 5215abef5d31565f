#!/bin/sh
# quietkv at eddf5fb (the table index in one flat buffer, no allocation per probed table):
# cargo build --release -p quietkv-cli --features rocksdb,fjall
# Run twice, one after the other (first/, second/).
exec target/release/quietkv bench --scale full --experiment E1 --engines quietkv,rocksdb \
  --modes quietkv:auto,rocksdb:all-direct \
  --hot-keys 102400 --throttle 700 --repeats 3 --max-reruns 2 --dir /var/tmp/bench-scratch --keep-source --out ./out
