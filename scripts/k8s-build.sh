#!/usr/bin/env bash
# Builds the Kubernetes v1.20.2 control-plane binaries Muster's Kubernetes tests run against
# (kube-apiserver, kube-controller-manager, kubemark) from Debian's kubernetes source package.
#
# Why from source: CI machines have no Docker engine and cannot download kind/k3s releases, but
# they reach Debian's archive, whose kubernetes-client *source* package is the full upstream tree
# with vendor/. Debian's kubernetes-client *binary* package is not installed on purpose: it
# conflicts with a preinstalled kubectl. etcd comes from Debian's etcd-server.
#
# Idempotent: when the binaries are already in the cache it only checks etcd and exits.
# Needs root (or sudo) only for apt. Compiles under `nice` because the box is shared.
#
# Environment:
#   MUSTER_K8S_CACHE  where bin/ is installed (default ~/.cache/muster/k8s-1.20.2)
#   MUSTER_K8S_SRC    build directory: GOPATH with the source tree, go build cache
#                     (default ~/.cache/muster/src, about 1.5 GB after a build)
#   MUSTER_K8S_SKIP_KUBEMARK=1  do not build kubemark (the hollow node, optional)
set -euo pipefail

K8S_VERSION=1.20.2
DEB_VERSION=1.20.5+really$K8S_VERSION-1.1+deb12u1
CACHE=${MUSTER_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/muster/k8s-$K8S_VERSION}
WORK=${MUSTER_K8S_SRC:-${XDG_CACHE_HOME:-$HOME/.cache}/muster/src}
BIN=$CACHE/bin
GOROOT_DIR=/usr/lib/go-1.19
GOPATH_DIR=$WORK/gopath
KSRC=$GOPATH_DIR/src/k8s.io/kubernetes
REQUIRED=(kube-apiserver kube-controller-manager)

log() { printf '[k8s-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Runs a phase and logs its wall time, so the build times in docs/testing-kubernetes.md can be re-measured.
timed() {
  local what=$1 start=$SECONDS
  shift
  log "$what ..."
  "$@"
  log "$what done in $((SECONDS - start)) s"
}

as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "need root for: $* (run this script as root or install sudo)"
  fi
}

have_binaries() {
  local b
  for b in "${REQUIRED[@]}"; do
    [ -x "$BIN/$b" ] || return 1
  done
  [ "${MUSTER_K8S_SKIP_KUBEMARK:-0}" = 1 ] || [ -x "$BIN/kubemark" ]
}

# Args: package:file-it-installs ...; installs the packages whose file is absent.
ensure_packages() {
  local missing=() spec
  for spec in "$@"; do
    [ -e "${spec#*:}" ] || missing+=("${spec%%:*}")
  done
  [ ${#missing[@]} = 0 ] && return 0
  log "installing ${missing[*]}"
  local install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}")
  # A stale package index is the usual reason an install fails on a fresh machine: refresh once.
  as_root "${install[@]}" >/dev/null || { as_root apt-get update -qq && as_root "${install[@]}" >/dev/null; }
}

# apt-get source needs deb-src entries; Debian images ship only `Types: deb`.
ensure_deb_src() {
  if apt-cache showsrc kubernetes-client 2>/dev/null | grep -q '^Package: kubernetes'; then
    return 0
  fi
  local f=/etc/apt/sources.list.d/debian.sources
  if [ -f "$f" ] && grep -q '^Types: deb$' "$f"; then
    log "enabling deb-src in $f"
    as_root sed -i 's/^Types: deb$/Types: deb deb-src/' "$f"
  elif [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list; then
    log "adding deb-src lines to /etc/apt/sources.list.d/muster-deb-src.list"
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | as_root tee /etc/apt/sources.list.d/muster-deb-src.list >/dev/null
  fi
  as_root apt-get update -qq
  apt-cache showsrc kubernetes-client 2>/dev/null | grep -q '^Package: kubernetes' \
    || die "no source package for kubernetes-client after enabling deb-src; check the apt sources"
}

fetch_source() {
  [ -f "$KSRC/.muster-source-ok" ] && return 0
  ensure_deb_src
  local dl
  rm -rf "$WORK/download" "$KSRC"
  dl="$WORK/download"
  mkdir -p "$dl" "$(dirname "$KSRC")"
  # The pinned version is the tree the docs and tests were checked against; the archive keeps
  # only the newest revision, so a later security revision (still upstream 1.20.2) is taken then.
  local spec="kubernetes-client=$DEB_VERSION"
  if ! apt-cache showsrc kubernetes-client 2>/dev/null | grep -qx "Version: $DEB_VERSION"; then
    log "warning: $DEB_VERSION is no longer in the archive; fetching its current revision"
    spec=kubernetes-client
  fi
  (cd "$dl" && apt-get source -qq "$spec" 2>&1 \
    | grep -v -e 'unsandboxed as root' -e '^dpkg-source: info' >&2 || true)
  local tree
  tree=$(find "$dl" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
  [ -n "$tree" ] && [ -d "$tree/vendor" ] || die "apt-get source kubernetes-client gave no tree with vendor/ in $dl"
  # GOPATH mode needs the tree physically at src/k8s.io/kubernetes (a symlink confuses go list).
  mv "$tree" "$KSRC"
  rm -rf "$dl"
  touch "$KSRC/.muster-source-ok"
}

go_env() {
  export GOROOT=$GOROOT_DIR GOPATH=$GOPATH_DIR GOCACHE=$WORK/go-build
  export GO111MODULE=off CGO_ENABLED=0 GOPROXY=off GOFLAGS=
  export PATH=$GOROOT_DIR/bin:$PATH
}

# The one generated file the tarball lacks (upstream makes it in `make generated_files`):
# the OpenAPI definitions kube-apiserver serves. The input list mirrors Makefile.generated_files:
# every Go package dir (staging/src mapped to vendor/) with a file carrying a column-0 `// +k8s:` tag
# and a `+k8s:openapi-gen=` tag, minus code-generator and sample-apiserver.
generate_openapi() {
  local out=$KSRC/pkg/generated/openapi/zz_generated.openapi.go
  [ -s "$out" ] && return 0
  cd "$KSRC"
  nice -n 19 go build -o "$WORK/tools/openapi-gen" k8s.io/kubernetes/vendor/k8s.io/kube-openapi/cmd/openapi-gen
  local dirs
  dirs=$(find -H . \( -path ./_\* -o -path ./.\* -o -path ./vendor -o -path ./debian \) -prune \
      -o -type f -name '*.go' -print \
    | sed -e 's|^\./staging/src|vendor|' -e 's|^\./||' -e 's|/[^/]*$||' | LC_ALL=C sort -u \
    | grep -v -e '^vendor/k8s.io/code-generator/' -e '^vendor/k8s.io/sample-apiserver/' \
    | while read -r d; do
        grep -l '^// *+k8s:' "$d"/*.go 2>/dev/null | xargs -r grep -l '+k8s:openapi-gen=' || true
      done | xargs -r -n1 dirname | LC_ALL=C sort -u | sed 's|^|k8s.io/kubernetes/|' | paste -sd, -)
  [ -n "$dirs" ] || die "found no +k8s:openapi-gen packages in $KSRC"
  nice -n 19 "$WORK/tools/openapi-gen" --logtostderr --v 0 -i "$dirs" \
    -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
    -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt -r "$WORK/tools/openapi-violations.report"
  [ -s "$out" ] || die "openapi-gen wrote no $out"
}

build_cmd() {
  local name=$1 pkg=$2
  cd "$KSRC"
  local v=k8s.io/kubernetes/vendor/k8s.io/component-base/version
  local ldflags="-s -w -X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=20"
  ldflags+=" -X $v.gitTreeState=clean -X $v.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  # client-go carries its own copy of the version, which kubectl-like clients report
  ldflags+=" -X k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION"
  mkdir -p "$BIN"
  # Install atomically: a half-written binary in the cache would pass the idempotency check.
  nice -n 19 go build -ldflags "$ldflags" -o "$BIN/.$name.tmp" "$pkg"
  mv "$BIN/.$name.tmp" "$BIN/$name"
}

# The control plane looks for every program in one place, the cache's bin/.
link_etcd() {
  mkdir -p "$BIN"
  ln -sfn /usr/bin/etcd "$BIN/etcd"
}

main() {
  if have_binaries; then
    ensure_packages etcd-server:/usr/bin/etcd
    link_etcd
    log "binaries already in $BIN; nothing to do"
    return 0
  fi
  local start=$SECONDS
  timed "installing packages" ensure_packages golang-1.19-go:$GOROOT_DIR/bin/go etcd-server:/usr/bin/etcd \
    dpkg-dev:/usr/bin/dpkg-source
  timed "fetching source (apt-get source kubernetes-client)" fetch_source
  go_env
  timed "generating pkg/generated/openapi" generate_openapi
  local b
  for b in "${REQUIRED[@]}"; do
    [ -x "$BIN/$b" ] || timed "building $b" build_cmd "$b" "k8s.io/kubernetes/cmd/$b"
  done
  if [ "${MUSTER_K8S_SKIP_KUBEMARK:-0}" != 1 ] && [ ! -x "$BIN/kubemark" ]; then
    timed "building kubemark" build_cmd kubemark k8s.io/kubernetes/cmd/kubemark
  fi
  link_etcd
  log "installed into $BIN in $((SECONDS - start)) s: $(ls "$BIN" | paste -sd' ' -)"
}

main "$@"
