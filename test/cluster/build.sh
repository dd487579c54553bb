#!/usr/bin/env bash
# Builds the control-plane binaries the cluster tests run against, from the
# published upstream Go modules pinned in this directory:
#   kube-apiserver, kube-controller-manager, kube-scheduler  (go.mod here)
#   kubectl (for people following docs/cluster.md)           (go.mod here)
#   etcd                                                     (etcd/go.mod)
# Binaries land in a cache keyed by version,
#   ${DRA_AFFINITY_CACHE:-$HOME/.cache/dra-affinity}/cluster/<k8s>-<etcd>/bin/
# and a second run finds them there and does nothing; a cache missing some of
# them (e.g. one made before kubectl was added) gets only the missing ones
# built. The last line printed on stdout is that bin directory (progress goes
# to stderr).
#
# Environment:
#   DRA_AFFINITY_CACHE         cache root (default: $HOME/.cache/dra-affinity)
#   DRA_AFFINITY_GO_BUILD_JOBS go build -p (default: 1, friendly to a shared 2-core machine)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
k8s_binaries=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
binaries=("${k8s_binaries[@]}" etcd)

log() { printf 'build.sh: %s\n' "$*" >&2; }

if ! command -v go >/dev/null 2>&1; then
    log "error: 'go' is not on PATH; install Go >= 1.26 to build the control plane"
    exit 2
fi

# Versions come from the go.mod files, so bumping a pin moves to a new cache key.
mod_version() { # <go.mod> <module path>
    awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$1"
}
k8s_version="$(mod_version "$here/go.mod" k8s.io/kubernetes)"
etcd_version="$(mod_version "$here/etcd/go.mod" go.etcd.io/etcd/server/v3)"
if [[ -z "$k8s_version" || -z "$etcd_version" ]]; then
    log "error: cannot read k8s.io/kubernetes from $here/go.mod or go.etcd.io/etcd/server/v3 from $here/etcd/go.mod"
    exit 2
fi

cache_root="${DRA_AFFINITY_CACHE:-$HOME/.cache/dra-affinity}"
key_dir="$cache_root/cluster/${k8s_version}-${etcd_version}"
bin_dir="$key_dir/bin"

all_present() {
    local b
    for b in "${binaries[@]}"; do
        [[ -x "$bin_dir/$b" ]] || return 1
    done
}

if all_present; then
    log "cached: $bin_dir"
    echo "$bin_dir"
    exit 0
fi

mkdir -p "$key_dir"
# One build at a time per cache key (parallel pytest workers, two shells).
exec 9>"$key_dir/.lock"
log "waiting for the build lock $key_dir/.lock"
flock 9
if all_present; then
    log "cached (built meanwhile): $bin_dir"
    echo "$bin_dir"
    exit 0
fi

jobs="${DRA_AFFINITY_GO_BUILD_JOBS:-1}"
stage="$(mktemp -d "$key_dir/.stage.XXXXXX")"
trap 'rm -rf "$stage"' EXIT

# Version stamps: without them the binaries call themselves v0.0.0-master.
minor="${k8s_version#v1.}"
minor="${minor%%.*}"
vpkg=k8s.io/component-base/version
k8s_ldflags="-s -w -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"

start=$SECONDS
built=()
k8s_pkgs=()
for b in "${k8s_binaries[@]}"; do
    [[ -x "$bin_dir/$b" ]] || { k8s_pkgs+=("k8s.io/kubernetes/cmd/$b"); built+=("$b"); }
done
if ((${#k8s_pkgs[@]})); then
    log "building ${k8s_pkgs[*]##*/} $k8s_version (go build -p $jobs)"
    (
        cd "$here"
        go build -p "$jobs" -trimpath -ldflags="$k8s_ldflags" -o "$stage/" "${k8s_pkgs[@]}"
    )
fi
if [[ ! -x "$bin_dir/etcd" ]]; then
    log "building etcd $etcd_version"
    (
        cd "$here/etcd"
        go build -p "$jobs" -trimpath -ldflags="-s -w" -o "$stage/etcd" go.etcd.io/etcd/server/v3
    )
    built+=(etcd)
fi

mkdir -p "$bin_dir"
for b in "${built[@]}"; do
    mv -f "$stage/$b" "$bin_dir/$b"
done
log "built ${built[*]} in $((SECONDS - start)) s: $bin_dir"
echo "$bin_dir"
