#!/usr/bin/env bash
# Puts promtool (from Debian's `prometheus` package) where the alert-rule tests find it,
# and prints the directory holding it (the last line on stdout).
#
# The package brings the Prometheus server too, whose install would start a service; only
# promtool is needed, so the .deb is fetched with apt and its files unpacked into
#   ${DRA_AFFINITY_CACHE:-$HOME/.cache/dra-affinity}/promtool/<version>/usr/bin/
# (nothing installed system-wide; a second run finds it there). A promtool already on PATH
# is used as it is.
set -euo pipefail

log() { printf 'promtool/install.sh: %s\n' "$*" >&2; }

if command -v promtool >/dev/null 2>&1; then
    dirname "$(command -v promtool)"
    exit 0
fi
command -v apt-get >/dev/null 2>&1 || { log "error: no promtool on PATH and no apt-get to fetch it"; exit 2; }

version="$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')"
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    log "package lists have no prometheus: apt-get update"
    apt-get update -qq >&2
    version="$(apt-cache policy prometheus | awk '/Candidate:/ {print $2}')"
fi
root="${DRA_AFFINITY_CACHE:-$HOME/.cache/dra-affinity}/promtool/${version}"
if [ ! -x "$root/usr/bin/promtool" ]; then
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    log "fetching prometheus ${version} (for promtool)"
    (cd "$work" && apt-get download -q "prometheus=${version}" >&2)
    mkdir -p "$root.tmp"
    dpkg-deb -x "$work"/prometheus_*.deb "$root.tmp"
    rm -f "$root.tmp/usr/bin/prometheus"   # the server: not needed
    rm -rf "$root" && mv "$root.tmp" "$root"
fi
"$root/usr/bin/promtool" --version >&2
echo "$root/usr/bin"
