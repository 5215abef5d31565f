#!/bin/bash
# The standard workloads at quick scale, both value sizes, with the peers.
# Build: cargo build --release -p quietkv-cli --features rocksdb,fjall   (engine at 13d0ca9)
set -eu
quietkv bench --experiment standard --engines quietkv,rocksdb,fjall \
  --modes quietkv:auto,rocksdb:buffered,fjall:buffered \
  --value-size 100,4096 --repeats 3 --dir /work/bench-scratch/standard --out .
