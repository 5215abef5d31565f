#!/bin/bash
# Where the stream's CPU goes, and whether shorter sends help: the Backup
# class with the sender at nice 0 and 10, snapshot chunks of 4 MiB (the
# bench's default) and 512 KiB (the node's default), 2 rounds each, with
# every raftkv thread's CPU sampled once a second.
set -u
cd /work/bench/s36
python3 /work/notes/threadcpu.py > threads.log 2>&1 &
S=$!
for c in 4194304 524288; do
  echo "chunk $c $(date +%T)"
  ./quietkv-raftkv-new bench-snapshot --dir /work/bench/raftsnap --repeats 2 --chunk-bytes $c \
    --modes backup+nice=0,backup --out /work/bench/s36/diag-$c > diag-$c.log 2>&1
  echo "  rc $? $(date +%T)"
done
kill $S
echo "done $(date +%T)"
