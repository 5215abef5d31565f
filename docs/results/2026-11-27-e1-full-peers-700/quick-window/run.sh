#!/bin/sh
# quietkv at 1c260d6: the 1 MiB warm window (default) against 64 KiB and no warming, quick scale
exec target/release/quietkv bench --scale quick --experiment E1 --engines quietkv \
  --modes quietkv:auto,quietkv:auto+warmwin=64,quietkv:auto+nowarm \
  --throttle 500 --repeats 3 --max-reruns 2 --dir /var/tmp/bench-scratch --out ./out
