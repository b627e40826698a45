#!/usr/bin/env bash
# Cut a release: static binaries for linux and darwin on amd64 and arm64,
# each in dist/retain_<version>_<os>_<arch>.tar.gz, and dist/SHA256SUMS.
#
#   git tag -a v1.2.3 -m v1.2.3 && deploy/release.sh
#
# Run it on a clean checkout of the tag: the version is the one Go stamps
# from git into every binary (what `retain version` prints), and the archive
# names repeat it. A dirty tree is refused (its version would end in
# "+dirty"); RETAIN_ALLOW_DIRTY=1 builds one anyway, for a trial. An
# untagged commit gets a pseudo-version (v0.0.0-2026…-abcdef), fine for a
# snapshot. dist/ must be git-ignored: an untracked dist/ would itself make
# the tree dirty on the next run.
set -euo pipefail
cd "$(dirname "$0")/.."

platforms=${RETAIN_PLATFORMS:-"linux/amd64 linux/arm64 darwin/amd64 darwin/arm64"}
dist=dist
rm -rf "$dist"
mkdir -p "$dist/tmp"

# Archives are reproducible: entries in name order, owned by 0:0, dated
# at the commit, gzip without a timestamp.
epoch=$(git log -1 --format=%ct)

version=
for p in $platforms; do
  os=${p%/*} arch=${p#*/}
  work="$dist/tmp/${os}_${arch}"
  mkdir -p "$work"
  RETAIN_REQUIRE_VCS=1 deploy/build-binary.sh "$work/retain" "$os" "$arch"
  # Read the version back from the binary, not from git, so the name cannot
  # disagree with what the binary prints.
  v=$(go version -m "$work/retain" | awk '$1 == "mod" && $2 == "github.com/retain-dev/retain" { print $3 }')
  case $v in
    "" | "(devel)") echo "release: $work/retain carries no version stamp" >&2; exit 1 ;;
    *+dirty) if [ "${RETAIN_ALLOW_DIRTY:-0}" != 1 ]; then
        echo "release: the tree has uncommitted or untracked changes (version $v); commit them, or RETAIN_ALLOW_DIRTY=1 for a trial" >&2
        git status --short >&2
        exit 1
      fi ;;
  esac
  if [ -n "$version" ] && [ "$v" != "$version" ]; then
    echo "release: $os/$arch stamped $v, earlier platforms $version" >&2; exit 1
  fi
  version=$v
  cp README.md "$work/"
  name="retain_${version}_${os}_${arch}"
  tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
    -C "$work" -cf - retain README.md | gzip -n -9 > "$dist/$name.tar.gz"
  echo "release: $dist/$name.tar.gz"
done
rm -rf "$dist/tmp"

(cd "$dist" && if command -v sha256sum >/dev/null; then sha256sum -- *.tar.gz; else shasum -a 256 -- *.tar.gz; fi) > "$dist/SHA256SUMS"
echo "release: $version in $dist/ (SHA256SUMS beside the archives)"
