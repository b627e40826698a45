#!/usr/bin/env bash
# The one place retain's release build flags live: deploy/release.sh, the
# image (deploy/Dockerfile) and CI (deploy/check.sh) all build through here,
# so the binary CI checks is built the way the shipped one is.
#
#   deploy/build-binary.sh OUT [GOOS [GOARCH]]     (or GOOS/GOARCH in the env)
#
# OUT is the binary's path. The version `retain version` prints is the one Go
# stamps from git (runtime/debug.ReadBuildInfo): the tag on a clean checkout
# of a tagged commit (v1.2.3), a pseudo-version otherwise, "+dirty" with
# uncommitted changes, "dev" when the tree has no .git. Set
# RETAIN_REQUIRE_VCS=1 to fail instead of building a "dev" binary.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  echo "usage: $0 OUT [GOOS [GOARCH]]" >&2
  exit 2
fi
out=$1
goos=${2:-${GOOS:-$(go env GOOS)}}
goarch=${3:-${GOARCH:-$(go env GOARCH)}}
cd "$(dirname "$0")/.."

vcs=auto
if [ "${RETAIN_REQUIRE_VCS:-0}" = 1 ]; then
  vcs=true # fails the build when git cannot describe the tree
fi

# CGO_ENABLED=0: a static binary for distroless/scratch and any libc.
# GOFLAGS is reset because a caller's (this machine's has -buildvcs=false)
# would change the build; -buildvcs below restores the version stamp.
# go.work stays on: the modules this tree holds (core/storage, pluginproto,
# conformance) build from this tree, at the version every go.mod requires
# them at; a build from the published modules is the install check
# (.ci/install-check), and a release tags them first (docs/releasing.md).
# -trimpath: no build machine paths in the binary or its stack traces.
# -s -w: no symbol table or DWARF, a third of the size; panics still carry
# function names and lines. -buildid= with -trimpath makes two builds of one
# commit byte-identical.
env CGO_ENABLED=0 GOOS="$goos" GOARCH="$goarch" GOFLAGS=-mod=readonly \
  go build -trimpath -buildvcs="$vcs" -ldflags='-s -w -buildid=' -o "$out" ./cmd/retain
