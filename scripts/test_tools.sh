#!/bin/sh
# The programs the tests run for real, from Debian's packages (`make test` calls this
# before pytest): a Prometheus server and promtool (tests/prom.py: the exporter read back
# by a real server, `sattui cluster`, `report --prometheus`) and tmux (the monitor in a
# real terminal: tests/e2e/test_demo_tmux.py, test_security.py).
#
# Where one is missing and we are root with apt-get, it is installed (Debian's prometheus
# package starts no server by itself: the tests start their own on 127.0.0.1). Otherwise
# this stops at once with one line that names the package and the command.
set -eu

need=""
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || need="prometheus"
command -v tmux >/dev/null 2>&1 || need="${need:+$need }tmux"
[ -z "$need" ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "make test: installing Debian's $need for the tests (apt-get install -y $need)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    # shellcheck disable=SC2086  # one word per package
    apt-get install -y -qq $need >/dev/null
    { command -v prometheus && command -v promtool && command -v tmux; } >/dev/null 2>&1 && exit 0
    echo "make test: apt-get installed $need but prometheus, promtool or tmux is still not on PATH" >&2
    exit 1
fi
echo "make test: the tests need Debian's $need: run 'sudo apt-get install -y $need' (or install $need another way), then make test again" >&2
exit 1
