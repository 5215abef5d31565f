#!/bin/bash
# Instructions per point read from tables, for the engine at each commit:
# examples/point_reads fills 200,000 keys (16-byte keys, 100-byte values),
# compacts them into tables, then does 100,000 random gets; callgrind
# counts the get loop alone. Run from a checkout of the repository.
set -eu
for commit in "$@"; do
  git worktree add -f "/tmp/pr-src-$commit" "$commit" >/dev/null
  (cd "/tmp/pr-src-$commit" && cargo build -q --release -p quietkv --example point_reads \
     --target-dir /tmp/pr-target)
  cp /tmp/pr-target/release/examples/point_reads "/tmp/point_reads-$commit"
  git worktree remove --force "/tmp/pr-src-$commit"
  rm -rf "/tmp/pr-db-$commit"
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='point_reads::read_phase' \
    --callgrind-out-file="/tmp/callgrind-$commit.out" \
    "/tmp/point_reads-$commit" "/tmp/pr-db-$commit" table get 200000 100000 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\)/\1/p' |
    awk -v c="$commit" '{ printf "%s %.0f instructions per get\n", c, $1 / 100000 }'
  rm -rf "/tmp/pr-db-$commit"
done
