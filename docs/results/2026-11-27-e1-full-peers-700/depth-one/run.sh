#!/bin/sh
# quietkv at 1c260d6: a 64 KiB warm window with the compaction's one request in flight (+depth=1) against four
exec target/release/quietkv bench --scale full --experiment E1 --engines quietkv,rocksdb \
  --modes quietkv:auto+warmwin=64,quietkv:auto+warmwin=64+depth=1,rocksdb:all-direct \
  --hot-keys 102400 --throttle 700 --repeats 3 --max-reruns 2 --dir /var/tmp/bench-scratch --keep-source --out ./out
