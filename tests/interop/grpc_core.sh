#!/usr/bin/env bash
# gRPC C-core (grpcio, from PyPI) as an independent xDS client: it reads the
# bootstrap `xdsfed testbed --bootstrap-out` writes, unchanged, and calls the
# testbed's health backends through the federated example's listener, as
# xds:///greeter (default template) and xds://cloud.example/greeter
# (per-authority template).
#
#   tests/interop/grpc_core.sh PATH/TO/xdsfed WORK_DIR
set -euo pipefail
xdsfed="$1"
work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

python3 -m venv "$work/venv"
# A registry hiccup is retried, not taken for a failure of the bootstrap.
for attempt in 1 2 3; do
  "$work/venv/bin/pip" install --quiet --disable-pip-version-check \
    grpcio==1.85.1 grpcio-health-checking==1.85.1 && break
  [ "$attempt" = 3 ] && exit 1
  sleep 5
done

"$xdsfed" testbed --config "$root/bootstrap-examples/testbed-federated.yaml" \
  --bootstrap-out "$work/grpc-bootstrap.json" >"$work/testbed.out" 2>&1 &
testbed=$!
trap 'kill -INT "$testbed" 2>/dev/null || true; wait "$testbed" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  grep -q '^ready$' "$work/testbed.out" && break
  sleep 0.1
done
grep -q '^ready$' "$work/testbed.out" || { cat "$work/testbed.out" >&2; exit 1; }

GRPC_XDS_BOOTSTRAP="$work/grpc-bootstrap.json" timeout 120 \
  "$work/venv/bin/python" "$here/grpc_health_check.py" \
  xds:///greeter xds://cloud.example/greeter
