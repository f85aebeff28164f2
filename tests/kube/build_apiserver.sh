#!/usr/bin/env bash
# Builds the Kubernetes API server the Kubeflow tests run against, once, from Debian packages
# alone (no module proxy, no container registry), and prints the binary's path on stdout.
#
#   tests/kube/build_apiserver.sh            # build if not cached, print the path
#   STRATEGIST_KUBE_APISERVER=/path/kube-apiserver tests/kube/build_apiserver.sh   # use that one
#
# Sources: Debian's `kubernetes` source package (1.20.2, with vendor/, so Go needs no network),
# `golang-go` (1.19) and `etcd-server` (3.4, which the tests start beside it). Under Go 1.19
# the vendored github.com/modern-go/reflect2 1.0.1 crashes on the first custom-resource write
# (it reads Go runtime internals that moved); Debian's golang-github-modern-go-reflect2-dev
# 1.0.2 is put in its place. The binary is cached outside the repository, in
# ${STRATEGIST_CACHE:-~/.cache/strategist}/kube-apiserver/<version>/; the source tree and the
# Go build cache (~2.5 GB) are deleted once it is built. 8-20 min on 2 cores; ~110 MB.
# Installing packages needs root (or sudo); CI runs this as root with no standard input.
set -euo pipefail

log() { echo "build_apiserver: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [ -n "${STRATEGIST_KUBE_APISERVER:-}" ]; then
    [ -x "$STRATEGIST_KUBE_APISERVER" ] \
        || die "STRATEGIST_KUBE_APISERVER=$STRATEGIST_KUBE_APISERVER is not an executable file"
    command -v etcd >/dev/null 2>&1 || log "note: no etcd on PATH (Debian: apt-get install etcd-server)"
    echo "$STRATEGIST_KUBE_APISERVER"
    exit 0
fi

VERSION=1.20.2
CACHE_ROOT="${STRATEGIST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strategist}/kube-apiserver"
CACHE="$CACHE_ROOT/$VERSION"
BINARY="$CACHE/kube-apiserver"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo -n"
fi
export DEBIAN_FRONTEND=noninteractive

install_packages() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing ${missing[*]}"
    $SUDO apt-get update -qq || die "apt-get update failed"
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || die "apt-get install ${missing[*]} failed (needs root or password-less sudo)"
}

# The tests start etcd beside the API server, whether it was built or cached.
install_packages etcd-server

mkdir -p "$CACHE"
exec 9>"$CACHE_ROOT/.lock"
flock 9  # one build at a time (CI and a test run may both ask)

if [ -x "$BINARY" ]; then
    echo "$BINARY"
    exit 0
fi

started=$(date +%s)
log "building kube-apiserver $VERSION from Debian's kubernetes source package (8-20 min on 2 cores)"
install_packages golang-go golang-github-modern-go-reflect2-dev dpkg-dev rsync

# deb-src for the mirror this machine already uses (deb822 or one-line format).
if ! apt-get source --download-only --print-uris kubernetes >/dev/null 2>&1; then
    mirror="" suite=""
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
        suite=$(awk '/^Suites:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    fi
    if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
        read -r mirror suite < <(awk '$1 == "deb" && $2 !~ /^\[/ {print $2, $3; exit}' /etc/apt/sources.list) || true
    fi
    [ -n "$mirror" ] && [ -n "$suite" ] || die "no Debian mirror found in /etc/apt to add deb-src for"
    log "adding deb-src $mirror $suite main"
    printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$mirror" "$suite" | $SUDO tee /etc/apt/sources.list.d/strategist-deb-src.sources >/dev/null
    $SUDO apt-get update -qq || die "apt-get update failed after adding deb-src"
fi

WORK="$CACHE/work"
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK"
apt-get source --download-only kubernetes >/dev/null || die "apt-get source --download-only kubernetes failed"
dsc=$(ls kubernetes_*.dsc | head -n1)
dpkg-source --no-check -x "$dsc" src >/dev/null || die "dpkg-source -x $dsc failed"
cd src
[ -d vendor/github.com/modern-go/reflect2 ] \
    || die "vendor/github.com/modern-go/reflect2 missing: this source package has no vendor/"

reflect2=/usr/share/gocode/src/github.com/modern-go/reflect2
[ -d "$reflect2" ] || die "$reflect2 missing (golang-github-modern-go-reflect2-dev)"
rm -rf vendor/github.com/modern-go/reflect2
mkdir -p vendor/github.com/modern-go/reflect2
# Only the package's Go files: vendor/ must not carry test files or a go.mod of its own.
find "$reflect2" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) ! -name '*_test.go' \
    -exec cp {} vendor/github.com/modern-go/reflect2/ \;

# Not a git checkout: the version comes from these (hack/lib/version.sh).
export KUBE_GIT_VERSION="v$VERSION" KUBE_GIT_TREE_STATE=clean KUBE_GIT_COMMIT=""
export KUBE_GIT_MAJOR=1 KUBE_GIT_MINOR=20
export GOCACHE="$WORK/gocache" GOPATH="$WORK/gopath"
env -u GOFLAGS CGO_ENABLED=0 GOPROXY=off GO111MODULE=on \
    nice -n 10 make WHAT=cmd/kube-apiserver >&2 || die "make WHAT=cmd/kube-apiserver failed"

built=$(find _output -type f -name kube-apiserver -perm -u+x | head -n1)
[ -n "$built" ] || die "make finished but no kube-apiserver under _output/"
cp "$built" "$BINARY.tmp"
mv "$BINARY.tmp" "$BINARY"
"$BINARY" --version >&2 || die "$BINARY does not run"
cd "$CACHE"
rm -rf "$WORK"
log "built $BINARY in $(( $(date +%s) - started )) s"
echo "$BINARY"
