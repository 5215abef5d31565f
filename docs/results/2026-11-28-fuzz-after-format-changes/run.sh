#!/bin/bash
# Each parser target fuzzed 330 s, two at a time, new corpus entries in /tmp/fcorp (not committed).
cd "$(git rev-parse --show-toplevel)/fuzz"
cargo +nightly fuzz build -O
mkdir -p /tmp/fuzzart
run() { t=$1; mkdir -p /tmp/fcorp/$t; cargo +nightly fuzz run -O $t /tmp/fcorp/$t corpus/$t -- -max_total_time=330 -artifact_prefix=/tmp/fuzzart/$t- -print_final_stats=1 > fuzz-$t.log 2>&1; echo "$t rc=$?"; }
for pair in "table index" "manifest version_edit" "wal batch" "properties block"; do
  set -- $pair
  run $1 & run $2 & wait
done
