#!/bin/bash
# Where the CPU goes while a paced stream runs: every raftkv thread sampled once a second.
set -u
cd /work/bench/s12/raft
# /work/notes/threadcpu.py was a copy of ../2026-11-27-raft-snapshot-chunks/threadcpu.py
python3 /work/notes/threadcpu.py > threads-paced.log 2>&1 &
S=$!
echo "diag $(date -u +%T)" >> diag-times.txt
/work/bench/quietkv-raftkv-39f536d bench-snapshot --dir /work/bench/raftsnap --repeats 1 --send-mib-per-sec 32 \
    --modes backup --out /work/bench/s12/raft/diag32 > diag32.log 2>&1
echo "  rc $? $(date -u +%T)" >> diag-times.txt
kill $S
