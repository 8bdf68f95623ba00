#!/usr/bin/env bash
# Builds the release of mcp-aggregator: for each target, a static binary stamped with
# the version and commit, packed with LICENSE and README.md (tar.gz; zip for
# windows), a CycloneDX JSON SBOM of that binary, and SHA256SUMS over all of them.
#
#   scripts/release.sh [-o DIR] [VERSION]
#
#   -o DIR    where to write (default: dist/ at the repository root); emptied first
#   VERSION   the version to stamp (default: the v* tag at HEAD without its v, else
#             dev-<short commit>, with -dirty for uncommitted changes)
#
# Environment: COMMIT overrides the commit to stamp (default: git rev-parse HEAD);
# TARGETS overrides the GOOS/GOARCH list (default: linux, darwin, windows x amd64,
# arm64; windows is packed as zip); CA_BUNDLE names the CA bundle copied next to the linux binaries for the
# container image (default: /etc/ssl/certs/ca-certificates.crt, skipped if absent).
#
# Besides the archives, DIR keeps each target's unpacked files in DIR/OS_ARCH/;
# DIR is the build context of deploy/container/Containerfile.
#
# Needs Go, git, tar and gzip (and zip for windows targets); the SBOM tool, cyclonedx-gomod, comes through the
# Go module proxy at the version pinned below.
set -euo pipefail

cyclonedx_gomod=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0

usage="usage: scripts/release.sh [-o DIR] [VERSION]"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

out=dist
while getopts "o:" opt; do
  case $opt in
    o) out=$OPTARG ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ $# -gt 1 ]; then
  echo "$usage" >&2
  exit 2
fi
case $out in /*) ;; *) out="$root/$out" ;; esac

commit=${COMMIT:-$(git rev-parse HEAD)}
dirty=""
if [ -z "${COMMIT:-}" ] && [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  dirty="-dirty"
fi
if [ $# -eq 1 ]; then
  version=$1
elif tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null); then
  version=${tag#v}$dirty
else
  version="dev-${commit:0:12}$dirty"
fi
case $version in
  "" | *[!A-Za-z0-9.+_-]*)
    echo "release: version \"$version\": use letters, digits and . + _ -" >&2
    exit 2
    ;;
esac
# Archive entries carry the commit's time, so that two builds of one commit give
# the same archives.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct "$commit" 2>/dev/null || date +%s)}

targets=${TARGETS:-"linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"}
ca_bundle=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}

rm -rf "$out"
mkdir -p "$out"
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT

echo "==> mcp-aggregator $version ($commit) into $out"
GOBIN=$tools CGO_ENABLED=0 GOOS='' GOARCH='' go install "$cyclonedx_gomod"

for target in $targets; do
  goos=${target%/*}
  goarch=${target#*/}
  name="mcp-aggregator_${version}_${goos}_${goarch}"
  stage="$out/${goos}_${goarch}"
  exe=mcp-aggregator
  if [ "$goos" = windows ]; then exe=mcp-aggregator.exe; fi
  echo "==> $goos/$goarch"
  mkdir -p "$stage"

  # Static, without local paths, stamped; -s -w drops the symbol table and DWARF
  # (the build info that `go version -m` reads stays, without -ldflags, which
  # -trimpath leaves out).
  CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath -buildvcs=false \
    -ldflags "-s -w -X main.version=$version -X main.commit=$commit" \
    -o "$stage/$exe" ./cmd/mcp-aggregator
  cp LICENSE README.md "$stage/"
  touch -d "@$epoch" "$stage/$exe" "$stage/LICENSE" "$stage/README.md"

  # The archive holds one directory named like it, so that unpacking it puts nothing
  # loose in the current directory.
  pack=$(mktemp -d "$tools/pack.XXXXXX")
  mkdir "$pack/$name"
  cp -p "$stage/$exe" "$stage/LICENSE" "$stage/README.md" "$pack/$name/"
  if [ "$goos" = windows ]; then
    archive="$name.zip"
    (cd "$pack" && TZ=UTC zip -q -X -r "$out/$archive" "$name")
  else
    archive="$name.tar.gz"
    tar -C "$pack" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" --mode=go-w,a+rX \
      -cf - "$name" | gzip -9 -n >"$out/$archive"
  fi

  # The SBOM lists what this binary is built from, read from the build info the Go
  # linker put in it: the modules of this target's packages and the standard library,
  # with their licenses, detected in the module cache that the build just filled (the
  # main module's own is LICENSE). GOOS and GOARCH name the target in its package URL.
  # Its log is shown only when it fails.
  if ! GOOS=$goos GOARCH=$goarch GOPROXY=off "$tools/cyclonedx-gomod" bin -json -licenses -std -version "$version" \
    -output "$out/$name.cdx.json" "$stage/$exe" 2>"$tools/sbom.log"; then
    cat "$tools/sbom.log" >&2
    echo "release: the SBOM of $goos/$goarch failed" >&2
    exit 1
  fi
done

if [ -f "$ca_bundle" ]; then
  cp "$ca_bundle" "$out/ca-certificates.crt"
else
  echo "release: no CA bundle at $ca_bundle; the container image needs one at $out/ca-certificates.crt" >&2
fi

shopt -s nullglob
(cd "$out" && sha256sum -- *.tar.gz *.zip *.cdx.json >SHA256SUMS)
echo "==> $out"
(cd "$out" && ls -l -- *.tar.gz *.zip *.cdx.json SHA256SUMS)
