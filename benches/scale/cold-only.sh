#!/bin/bash
# Runs one group of the scale bench until its cold start rows are printed,
# then stops it and its fleet: a cold start alone, for alternated runs of
# two builds.
#
#   cargo bench --bench scale --no-run    # prints the binary's path
#   BIN=target/release/deps/scale-<hash> benches/scale/cold-only.sh eds
set -u
group=${1:-eds}
bin=${BIN:?set BIN to the bench binary cargo bench --no-run printed}
out=$(mktemp)
"$bin" "$group" > "$out" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  grep -q "CPU, client / testbed" "$out" && break
  sleep 0.2
done
kill "$pid" 2> /dev/null
pkill -f -- "--serve-fleet" 2> /dev/null
wait "$pid" 2> /dev/null
grep -E "complete snapshot|CPU, client|peak RSS" "$out"
rm -f "$out"
