#!/bin/bash
# The joiner on CPU 1 alone, the leader on CPU 0 (as if the joiner were
# another machine): the leader's sending at nice 0 against nice 10.
set -u
cd /work/bench/s36
python3 /work/notes/threadcpu.py > threads-pinned.log 2>&1 &
S=$!
./quietkv-raftkv-new bench-snapshot --dir /work/bench/raftsnap --repeats 3 --joiner-cpu 1 \
  --modes backup+nice=0,backup --out /work/bench/s36/pinned > pinned.log 2>&1
echo "rc $? $(date +%T)"
kill $S
