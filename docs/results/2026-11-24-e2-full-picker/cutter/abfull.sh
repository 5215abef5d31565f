#!/bin/bash
# abfull.sh TAG REPS MODES bin1 bin2 ...  (full E2 H=100k, interleaved single-repeat runs)
tag=$1; reps=$2; modes=$3; shift 3
cd /work/notes/s9
for rep in $(seq 1 $reps); do
for bin in "$@"; do
  b=$(basename $bin); name=$tag-$b-$rep
  $bin bench --scale full --experiment E2 --hot-keys 100000 --modes "$modes" --repeats 1 --dir /work/bench-scratch --keep-source --out /work/notes/s9/$name > $name.out 2> $name.err
  echo "$name: rc=$?"
done; done
