#!/bin/sh
# Regenerates pluginproto/internal/pb from proto/retain/storage/v1/storage.proto.
# Run it through `go generate ./pluginproto/` from the repository root.
#
# Needs protoc on PATH (Debian: apt-get install protobuf-compiler). The two
# Go code generators are installed, pinned, into the pluginproto module's .tools/bin
# (git-ignored) when missing or at another version.
set -eu

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1

here=$(cd "$(dirname "$0")" && pwd)
root=$here
bin="$root/.tools/bin"
mkdir -p "$bin"

if ! command -v protoc >/dev/null 2>&1; then
	echo "gen.sh: protoc not found; install it (Debian: apt-get install protobuf-compiler)" >&2
	exit 1
fi

have() { [ -x "$bin/$1" ] && "$bin/$1" --version 2>/dev/null | grep -q -- "$2"; }

have protoc-gen-go "$PROTOC_GEN_GO_VERSION" ||
	GOBIN="$bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
have protoc-gen-go-grpc "${PROTOC_GEN_GO_GRPC_VERSION#v}" ||
	GOBIN="$bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"

cd "$here/proto"
PATH="$bin:$PATH" protoc \
	--go_out="$root" --go_opt=module=github.com/retain-dev/retain/pluginproto \
	--go-grpc_out="$root" --go-grpc_opt=module=github.com/retain-dev/retain/pluginproto \
	retain/storage/v1/storage.proto
