#!/bin/bash
# Counts the client's instructions per endpoint update during LEDS churn
# at a tenth, under callgrind (valgrind), for machines without hardware
# counters: instrumentation is off through the cold start and on for
# SECONDS of churn; the fleet runs in its own process, uninstrumented.
# The client runs some fifty times slower there and handles responses
# in larger runs: the count is the work per update, not per round.
#
#   cargo bench --bench scale --no-run    # prints the binary's path
#   BIN=target/release/deps/scale-<hash> benches/scale/instructions.sh [SECONDS]
set -u
bin=${BIN:?set BIN to the bench binary cargo bench --no-run printed}
seconds=${1:-30}
dir=$(mktemp -d)
log=$dir/log
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/out" \
  "$bin" leds-tenth > "$log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do
  grep -q "CPU, client / testbed" "$log" && break
  sleep 3
done
callgrind_control -i on "$pid" > /dev/null 2>&1
sleep "$seconds"
callgrind_control -d "$pid" > /dev/null 2>&1
kill "$pid" 2> /dev/null
pkill -f -- "--serve-fleet" 2> /dev/null
wait "$pid" 2> /dev/null
dump=$(ls -S "$dir"/out.* | head -1)
total=$(callgrind_annotate "$dump" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
# Each endpoint update is one item of a response, named once.
updates=$(callgrind_annotate --tree=caller "$dump" \
  | sed -n 's/.*Item>::named (\([0-9,]*\)x).*/\1/p' | head -1 | tr -d ,)
echo "instructions: $total for $updates endpoint updates, $((total / updates)) an update"
echo "profile: $dump (callgrind_annotate --inclusive=yes $dump)"
