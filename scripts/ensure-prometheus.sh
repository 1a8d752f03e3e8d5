#!/usr/bin/env bash
# Make sure Prometheus and promtool can run here (Debian's prometheus package): the tests of
# zklock's alert rules and dashboard run them, as ZooKeeper's tests run a real ZooKeeper.
set -euo pipefail
if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
  echo "Prometheus: $(command -v prometheus)"; exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing Debian's prometheus package (prometheus, promtool)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq prometheus >/dev/null
  # the package starts a service where systemd runs; the tests start their own
  exit 0
fi
echo "Prometheus is missing: install Debian's prometheus package (sudo apt-get install prometheus)" >&2
exit 1
