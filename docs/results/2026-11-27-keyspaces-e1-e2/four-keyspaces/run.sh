#!/bin/bash
# E1 and E2 quick: one keyspace against four (the same data spread over
# four keyspaces), quietkv auto, 3 interleaved rounds each.
set -u
B=/work/bench/ks/quietkv-869eb82
cd /work/bench/ks
echo "E1 start $(date +%T)"
$B bench --experiment E1 --scale quick --modes quietkv:auto,quietkv:auto+ks=4 \
  --throttle 500 --repeats 3 --max-reruns 3 --dir /work/bench/ks --out /work/bench/ks/e1 > e1.log 2>&1
echo "E1 rc $? $(date +%T)"
$B bench --experiment E2 --scale quick --modes quietkv:auto,quietkv:auto+ks=4 \
  --repeats 3 --max-reruns 3 --dir /work/bench/ks --out /work/bench/ks/e2 > e2.log 2>&1
echo "E2 rc $? $(date +%T)"
