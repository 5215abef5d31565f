#!/bin/bash
# E1/E2 quick, one keyspace: the build from before keyspaces (7d97ed0)
# against this one, alternating binaries, order rotated each round; then
# the snapshot-stream diagnosis (diag.sh). One after the other, alone.
set -u
cd /work/bench/s36
OLD=/work/bench/quietkv-before
NEW=/work/bench/ks/quietkv-869eb82
for r in 0 1 2; do
  case $r in 0) ORDER="old new";; 1) ORDER="new old";; 2) ORDER="old new";; esac
  for exp in E1 E2; do
    for who in $ORDER; do
      B=$OLD; [ $who = new ] && B=$NEW
      extra=""; [ $exp = E1 ] && extra="--throttle 500"
      echo "round $r $exp $who $(date +%T)"
      $B bench --experiment $exp --scale quick --modes auto $extra --repeats 1 --max-reruns 2 \
        --dir /work/bench/ks --out /work/bench/s36/$exp-$who-$r > $exp-$who-$r.log 2>&1
      echo "  rc $?"
    done
  done
done
echo "E1/E2 done $(date +%T)"
./diag.sh > diag.log 2>&1
echo "all done $(date +%T)"
