#!/bin/bash
# Probe: RocksDB all-direct's memory in full E2 at H=100,000 (1 GiB cgroup), sampled from outside each second.
# VARIANT=default (system malloc)|arena2 ; BIN= ; OUT=
set -u
BIN=${BIN:?}; OUT=${OUT:?}; mkdir -p "$OUT"
if [ "${VARIANT:-default}" = arena2 ]; then export MALLOC_ARENA_MAX=2; fi
if [ "${VARIANT:-default}" = jemalloc ]; then export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2; fi
echo "start $(date -u +%T) variant=${VARIANT:-default}" >> "$OUT/times.txt"
"$BIN" bench --scale full --experiment E2 --hot-keys 100000 --engines rocksdb \
  --modes rocksdb:all-direct --repeats 1 --max-reruns 0 --keep-disturbed \
  --dir /work/bench-scratch/full --keep-source --out "$OUT/report" > "$OUT/bench.log" 2>&1 &
B=$!
while kill -0 $B 2>/dev/null; do
  W=$(pgrep -f "quietkv.*bench-worker" | head -1)
  if [ -n "$W" ]; then
    RSS=$(awk '/^VmRSS|^RssAnon|^RssFile/{printf "%s=%s ",$1,$2}' /proc/$W/status 2>/dev/null)
    CG=$(awk -F: '$2=="memory"{print $3}' /proc/$W/cgroup 2>/dev/null)
    MS=""
    if [ -n "$CG" ] && [ -f /sys/fs/cgroup/memory$CG/memory.stat ]; then
      MS=$(awk '$1=="rss"||$1=="cache"||$1=="mapped_file"{printf "%s=%d ",$1,$2/1048576}' /sys/fs/cgroup/memory$CG/memory.stat)
      MS="$MS usage=$(( $(cat /sys/fs/cgroup/memory$CG/memory.usage_in_bytes) / 1048576 ))"
    fi
    echo "$(date -u +%T) $RSS $MS" >> "$OUT/mem.txt"
  fi
  sleep 1
done
wait $B; echo "rc=$? end $(date -u +%T)" >> "$OUT/times.txt"
