#!/bin/bash
# One full E1 run of $MODE (quietkv:auto+nowarm with the engine at 68fb0f8:
# waits.txt; quietkv:auto+warmwin=64 at 1c260d6: waits-warmwin64.txt) with scheduler
# switches and their kernel stacks recorded during the compaction
# (perf sched record -g, system-wide), then each reader wait over 2 ms
# attributed to the state and stack its thread switched out with.
set -eu
B=${B:-target/release/quietkv}
MODE=${MODE:-quietkv:auto+nowarm}
$B bench --scale full --experiment E1 --engines quietkv --modes $MODE \
  --hot-keys 102400 --throttle 700 --repeats 1 --max-reruns 0 \
  --dir /var/tmp/bench-scratch --keep-source --out ./out > bench.log 2>&1 &
BENCH=$!
until grep -q "measured:" bench.log 2>/dev/null; do sleep 0.2; done
perf sched record -g -o sched.data > perf.log 2>&1 &
PERF=$!
until grep -q "after:" bench.log; do sleep 0.2; done
sleep 2
kill -INT $PERF; wait $PERF || true
wait $BENCH
perf sched timehist -i sched.data -g --state > timehist.txt 2>/dev/null
python3 "$(dirname "$0")/waits.py" timehist.txt
