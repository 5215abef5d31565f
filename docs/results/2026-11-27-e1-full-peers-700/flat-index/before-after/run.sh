#!/bin/bash
# Full E1 at 700 MiB/s, quietkv's default only: the binary before the read-path
# commits against the one after, alternating, one run each per round.
set -u
OLD=/work/bench/quietkv-c22f9b8
NEW=/work/bench/quietkv-eddf5fb
OUT=/work/bench/ab-e1
mkdir -p $OUT
for r in 0 1; do
  if [ $((r % 2)) = 0 ]; then order="OLD NEW"; else order="NEW OLD"; fi
  for which in $order; do
    bin=${!which}
    echo "round $r $which start $(date -u +%T)" >> $OUT/times.txt
    $bin bench --scale full --experiment E1 --engines quietkv --modes quietkv:auto \
      --hot-keys 102400 --throttle 700 --repeats 1 --max-reruns 0 --dir /work/bench-scratch --keep-source \
      --out $OUT/$which-$r > $OUT/$which-$r.log 2>&1
    grep "done:" $OUT/$which-$r.log | sed "s/^/round $r $which: /" >> $OUT/times.txt
  done
done
echo "end $(date -u +%T)" >> $OUT/times.txt
