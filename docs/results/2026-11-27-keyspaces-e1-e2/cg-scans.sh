#!/bin/bash
# Instruction counts of scans, seeks and misses: the build before keyspaces
# (7d97ed0) and now, the same example source (examples/scans.rs).
set -u
OUT=/work/bench/cg-scans; mkdir -p $OUT
for who in old new; do
  B=/work/target-cg-$who/release/examples/scans
  for mode in forward reverse seek missing; do
    dir=$OUT/db-$who-$mode; rm -rf $dir
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=scans::read_phase \
      --callgrind-out-file=$OUT/$who-$mode.cg $B $dir $mode 200000 100000 > $OUT/$who-$mode.log 2>&1 &
  done
  wait
  rm -rf $OUT/db-$who-*
done
for mode in forward reverse seek missing; do
  o=$(grep -o "Collected : [0-9]*" $OUT/old-$mode.log | grep -o "[0-9]*$")
  n=$(grep -o "Collected : [0-9]*" $OUT/new-$mode.log | grep -o "[0-9]*$")
  echo "$mode old $o new $n" | awk '{printf "%s %s %s %+.2f%%\n", $1, $3, $5, ($5/$3-1)*100}'
done
