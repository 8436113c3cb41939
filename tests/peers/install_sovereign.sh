#!/usr/bin/env bash
# sovereign (Atlassian's REST-JSON xDS control plane, from PyPI) for the
# end-to-end test tests/rest_sovereign.rs: a Python virtual environment in
# DIR with sovereign 0.32.12 and the dependencies it was tested with pinned,
# so that a new release of one of them cannot change what the test runs.
# Prints the path of the `sovereign` executable; the test finds it through
# XDSFED_SOVEREIGN:
#
#   export XDSFED_SOVEREIGN="$(tests/peers/install_sovereign.sh DIR)"
#
# About 20 seconds with a reachable PyPI (wheels only, nothing compiled).
set -euo pipefail
dir="${1:?usage: install_sovereign.sh DIR}"

python3 -m venv "$dir/venv" >&2
# A registry hiccup is retried, not taken for a failure of the test.
for attempt in 1 2 3; do
  "$dir/venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: \
    sovereign==0.32.12 \
    fastapi==0.139.2 starlette==1.10.0 pydantic==2.14.4 pydantic-core==2.50.5 \
    pydantic-settings==2.16.3 uvicorn==0.40.0 gunicorn==23.0.0 uvloop==0.22.1 \
    Jinja2==3.1.6 PyYAML==6.0.4 structlog==25.5.0 starlette-context==0.3.6 \
    glom==23.5.0 croniter==1.4.1 cryptography==50.0.2 >&2 && break
  [ "$attempt" = 3 ] && exit 1
  sleep 5
done
test -x "$dir/venv/bin/sovereign"
echo "$dir/venv/bin/sovereign"
