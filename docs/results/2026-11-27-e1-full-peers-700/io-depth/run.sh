#!/bin/sh
# quietkv at 68fb0f8: does the manual compaction's I/O depth (io_depth, 4 by default) queue user reads?
# cargo build --release -p quietkv-cli --features rocksdb,fjall
exec target/release/quietkv bench --scale full --experiment E1 --engines quietkv,rocksdb \
  --modes quietkv:auto,quietkv:auto+depth=1,rocksdb:both-direct,rocksdb:all-direct \
  --hot-keys 102400 --throttle 700 --repeats 3 --max-reruns 3 --dir /var/tmp/bench-scratch --keep-source --out ./out
