#!/bin/sh
# quietkv at 4eab8d0 plus the warm_window_bytes option (the +warmwin=KiB knob), as warm-window/
exec target/release/quietkv bench --scale quick --experiment E1 --engines quietkv \
  --modes quietkv:auto,quietkv:auto+warmwin=1024,quietkv:auto+nowarm \
  --throttle 500 --repeats 3 --max-reruns 2 --dir /var/tmp/bench-scratch --out ./out
