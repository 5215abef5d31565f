#!/bin/bash
# Quiet-window measurement: keyspace cost (before binary vs after, 1 and 4 keyspaces)
# and the small-database rule (auto vs auto+small=0), with the peers, 3 rounds.
set -u
NEW=${NEW:-target/release/quietkv}
OLD=${OLD:?the binary of 7d97ed0}
OUT=${OUT:-/tmp/standard-small-database}
M=(quietkv:auto quietkv:auto+small=0 quietkv:auto+small=0+ks=4 rocksdb:buffered fjall:buffered)
for r in 0 1 2; do
  # rotate the order each round
  ROT=("${M[@]:$r}" "${M[@]:0:$r}")
  modes=$(IFS=,; echo "${ROT[*]}")
  echo "round $r new: $modes $(date +%T)"
  if [ $r = 1 ]; then
    $OLD bench --experiment standard --engines quietkv --modes quietkv:auto --repeats 1 --dir $OUT/d --out $OUT/old-$r > $OUT/old-$r.log 2>&1
  fi
  $NEW bench --experiment standard --engines quietkv,rocksdb,fjall --modes $modes --repeats 1 --dir $OUT/d --out $OUT/new-$r > $OUT/new-$r.log 2>&1
  if [ $r != 1 ]; then
    echo "round $r old $(date +%T)"
    $OLD bench --experiment standard --engines quietkv --modes quietkv:auto --repeats 1 --dir $OUT/d --out $OUT/old-$r > $OUT/old-$r.log 2>&1
  fi
done
echo "done $(date +%T)"
