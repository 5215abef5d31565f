#!/bin/bash
# Instruction counts before (HEAD 9d08483) and after the block-cache map's hasher change.
set -u
OUT=/work/bench/cg-hash
run() { # label bin args...
  local label=$1; shift
  valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file=/dev/null "$@" 2>&1 | grep -o "Collected : [0-9]*" | sed "s/^/$label /"
}
for who in before after; do
  B=$OUT; [ $who = after ] && B=$OUT/after
  rm -rf $OUT/d-*
  run "$who table-get" --toggle-collect=point_reads::read_phase $B/point_reads $OUT/d-t table get 200000 200000 &
  run "$who missing" --toggle-collect=scans::read_phase $B/scans $OUT/d-m missing 200000 100000
  wait
  run "$who seek" --toggle-collect=scans::read_phase $B/scans $OUT/d-s seek 200000 100000 &
  run "$who forward" --toggle-collect=scans::read_phase $B/scans $OUT/d-f forward 200000 100000
  wait
  rm -rf $OUT/d-*
done
