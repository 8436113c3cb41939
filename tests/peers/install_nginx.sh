#!/usr/bin/env bash
# nginx 1.22.1 from Debian bookworm's packages, for the proxy-cache test
# tests/cdn_nginx.rs: a stock shared cache between the testbed's CDN origin
# and real clients. Skips the install when that version is already there.
# Prints the path of the `nginx` executable; the test finds it through
# XDSFED_NGINX:
#
#   export XDSFED_NGINX="$(tests/peers/install_nginx.sh)"
#
# Needs root (apt-get). The package's own service is not started: the test
# runs nginx as the current user with a configuration it writes.
set -euo pipefail
# The upstream version and Debian revision are pinned; the security update
# number is not: Debian's mirrors keep only the newest one, so an exact pin
# (1.22.1-9+deb12u7 when this was written) stops installing at the next
# security release.
version="1.22.1-9+deb12u*"

installed="$(dpkg-query -W -f='${Version}' nginx 2>/dev/null || true)"
# shellcheck disable=SC2053 # $version is a glob on purpose
if [[ "$installed" != $version ]] || [ ! -x /usr/sbin/nginx ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  # A mirror hiccup is retried, not taken for a failure of the test.
  for attempt in 1 2 3; do
    $sudo apt-get update -qq >&2 &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confold "nginx=$version" >&2 && break
    [ "$attempt" = 3 ] && exit 1
    sleep 5
  done
fi
test -x /usr/sbin/nginx
echo /usr/sbin/nginx
