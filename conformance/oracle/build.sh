#!/usr/bin/env bash
# Builds the differential oracle (upstream Kubernetes 1.37 allocator and CEL)
# into a content-addressed cache directory and prints the binary's path.
#
#   ${DRA_AFFINITY_CACHE:-$HOME/.cache/dra-affinity}/oracle/<hash>/oracle
#
# <hash> covers go.mod, go.sum and every .go source here, so an edit rebuilds
# and an unchanged tree does nothing. The build is single-job (-p 1) so it
# can run next to other work on a small machine.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
command -v go >/dev/null 2>&1 || { echo "build.sh: the go toolchain is not on PATH" >&2; exit 127; }

hash="$(
  for f in go.mod go.sum $(LC_ALL=C ls -1 ./*.go); do
    printf '%s\n' "$f"
    sha256sum < "$f"
  done | sha256sum | cut -c1-16
)"
cache="${DRA_AFFINITY_CACHE:-$HOME/.cache/dra-affinity}"
dir="$cache/oracle/$hash"
bin="$dir/oracle"
if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$dir"
# Concurrent callers (parallel test workers) wait for one build.
exec 9>"$dir/.lock"
flock 9
if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
tmp="$(mktemp "$dir/.oracle.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
# -mod=readonly: go.sum is committed and must already be complete.
GOFLAGS="${GOFLAGS:-} -mod=readonly -buildvcs=false" go build -p 1 -trimpath -o "$tmp" . >&2
chmod 0755 "$tmp"
mv -f "$tmp" "$bin"
trap - EXIT
echo "$bin"
