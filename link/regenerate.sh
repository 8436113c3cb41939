#!/usr/bin/env bash
# Writes link/hot-text.ld: the functions `xdsfed watch --listener` runs, in
# the order of the instructions it spends in them, for the linker to place
# together at the start of the binary's code (docs/performance.md, "The code
# the command runs, placed together").
#
# Usage: link/regenerate.sh [CLUSTERS]   (default 1000)
#
# Needs valgrind (callgrind records every function executed, however briefly)
# and a release build of this tree. Run it when a change moves the command's
# hot path to functions of other names; a stale list still links, it only
# leaves the new functions where they fall.
set -euo pipefail
cd "$(dirname "$0")/.."
clusters="${1:-1000}"

command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 2; }
cargo build --release --bin xdsfed
fleet="$(cargo bench --bench scale --no-run --message-format=json 2>/dev/null \
  | sed -n 's/.*"executable":"\([^"]*\/scale-[^"]*\)".*/\1/p' | tail -n 1)"
[ -x "$fleet" ] || { echo "the scale bench did not build" >&2; exit 1; }

work="$(mktemp -d)"
fleet_pid=""
trap '[ -n "$fleet_pid" ] && kill "$fleet_pid" 2>/dev/null; rm -rf "$work"' EXIT

# The fleet serves until its standard input closes.
mkfifo "$work/stdin"
"$fleet" --serve-fleet "$clusters" 1 1 listener <"$work/stdin" >"$work/fleet.out" 2>&1 &
fleet_pid=$!
exec 3>"$work/stdin"
for _ in $(seq 1 120); do grep -q '^ready' "$work/fleet.out" && break; sleep 0.5; done
uri="$(awk '/^uri/ {print $2}' "$work/fleet.out")"
[ -n "$uri" ] || { echo "the fleet did not start" >&2; exit 1; }
cat >"$work/bootstrap.json" <<JSON
{"node": {"id": "hot-text"},
 "xds_servers": [{"server_uri": "$uri", "channel_creds": [{"type": "insecure"}]}],
 "authorities": {"a0.test": {}}}
JSON

want="· $((2 + 2 * clusters)) resources"
valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/callgrind.out" \
  target/release/xdsfed watch --bootstrap "$work/bootstrap.json" \
  --listener xdstp://a0.test/envoy.config.listener.v3.Listener/edge \
  >"$work/watch.out" 2>"$work/valgrind.err" &
watch_pid=$!
for _ in $(seq 1 1200); do grep -q "$want" "$work/watch.out" && break; sleep 0.5; done
grep -q "$want" "$work/watch.out" || { echo "the watch never saw the whole graph" >&2; exit 1; }
kill -INT "$watch_pid"
wait "$watch_pid" || true

# Instructions per Rust function (callgrind's compressed names: "(id) name"
# defines an id, "(id)" reuses it; only the binary's own code has v0 names,
# and callgrind files the functions already in .text.hot under no object,
# so the object is not asked), most first; each name
# then loses what changes from one build to the next (the crates'
# disambiguators, the back references whose offsets follow their lengths,
# LLVM's numeric suffixes) to become a glob over function sections.
awk '
  function id_name(s,   id) {
    id = s; sub(/\).*/, "", id); sub(/^\(/, "", id)
    return id
  }
  /^c?fn=/ { v = substr($0, index($0, "=") + 1); id = id_name(v)
             if (index(v, ") ")) fns[id] = substr(v, index(v, ") ") + 2)
             if ($0 ~ /^fn=/) fn = fns[id]; next }
  /^calls=/ { skip = 1; next }
  /^[-+*0-9]/ { if (skip) { skip = 0; next }
                if (fn ~ /^_R/) cost[fn] += $NF }
  END { for (f in cost) print cost[f], f }
' "$work/callgrind.out" \
  | sort -k1,1nr -k2 \
  | awk '{ n = $2
           sub(/\047[0-9]+$/, "", n)
           gsub(/Cs[0-9A-Za-z]+_/, "Cs*_", n)
           gsub(/B[0-9A-Za-z]?[0-9A-Za-z]?[0-9A-Za-z]?_/, "B*_", n)
           sub(/\.[0-9a-z.]+$/, "*", n)
           if (!(n in seen)) { seen[n] = 1; print n } }' >"$work/patterns"

count="$(wc -l <"$work/patterns")"
[ "$count" -gt 100 ] || { echo "only $count functions recorded" >&2; exit 1; }
{
  echo "/* The functions \`xdsfed watch --listener\` runs at $clusters clusters, most"
  echo "   instructions first, placed before the rest of the code so that the"
  echo "   pages the kernel maps around them are pages the command uses."
  echo "   Written by link/regenerate.sh; $count functions. */"
  echo "SECTIONS"
  echo "{"
  echo "  .text.hot : {"
  sed 's/.*/    *(.text.& .text.unlikely.& .text.startup.&)/' "$work/patterns"
  echo "  }"
  echo "}"
  echo "INSERT BEFORE .text;"
} >link/hot-text.ld
echo "link/hot-text.ld: $count functions"
