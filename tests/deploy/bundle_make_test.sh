#!/usr/bin/env bash
# The worker bundle as deploy/bundle.sh makes it from this build: the same binaries give the
# same archive; it holds the launchers, the programs, the C library and its loader, and never
# the NVIDIA driver's libraries; its launchers start the programs on this machine with nothing
# added to their environment, and refuse an archive unpacked only in part.
#   bundle_make_test.sh BUILD_DIR OUT_DIR      (ctest: bundle_make_test; leaves the archive in
#                                              OUT_DIR for the bundle's other tests)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BUILD="$(cd "$1" && pwd)"
OUT="$2"
BIN="$BUILD/bin"
WORK="$(mktemp -d)"
# shellcheck source=tests/deploy/bundle_lib.sh
. "$HERE/bundle_lib.sh"
[ "$(uname -m)" = x86_64 ] || skip "the bundle is made on x86_64 only"
command -v python3 >/dev/null || require "python3 is not installed (deploy/bundle/libraries.py)"

mkdir -p "$WORK/a" "$WORK/b" "$OUT"
(cd "$WORK/a" && "$HERE/../../deploy/bundle.sh" "$BUILD") | tee "$WORK/bundle.out"
(cd "$WORK/b" && "$HERE/../../deploy/bundle.sh" "$BUILD") > /dev/null
archive="$(cd "$WORK/a" && ls tessera-worker-*-linux-x86_64.tar.gz)"
cmp "$WORK/a/$archive" "$WORK/b/$archive" || fail "two runs over the same build gave different archives"
echo "reproducible: $archive, $(du -k "$WORK/a/$archive" | cut -f1) KiB"

version="${archive#tessera-worker-}"
version="${version%-linux-x86_64.tar.gz}"
payload="lib/tessera-worker/$version"
tar -tzf "$WORK/a/$archive" > "$WORK/members"
for member in bin/tessera-worker bin/tessera "$payload/ld-linux-x86-64.so.2" \
  "$payload/bin/tessera-worker" "$payload/bin/tessera" "$payload/lib/libc.so.6" \
  "$payload/lib/libstdc++.so.6" "$payload/lib/libdl.so.2" "$payload/lib/libOpenImageIO.so.2.4" \
  lib/systemd/system/tessera-worker.service share/tessera/examples/worker.yaml \
  share/doc/tessera-worker/libraries.txt; do
  grep -qx "./$member" "$WORK/members" || fail "the archive lacks $member"
done
[ "$(tail -n 1 "$WORK/members")" = "./$payload/bundle-id" ] || fail "bundle-id is not the last member"
if grep -E 'libcuda|libnvidia' "$WORK/members"; then
  fail "the NVIDIA driver's libraries are the host's, never the bundle's"
fi

prefix="$WORK/prefix"
mkdir -p "$prefix"
tar -xzf "$WORK/a/$archive" -C "$prefix" --no-same-owner
env -i PATH=/usr/bin:/bin "$prefix/bin/tessera-worker" --help > "$WORK/help" ||
  fail "the bundled worker does not start here"
grep -q "Usage: $prefix/bin/tessera-worker" "$WORK/help" || fail "argv[0] is not the launcher's"
env -i PATH=/usr/bin:/bin "$prefix/bin/tessera" --version | grep -qx "tessera $version" ||
  fail "the bundled CLI does not start here"
# Through a link, as from a PATH folder.
ln -s "$prefix/bin/tessera" "$WORK/tessera-link"
"$WORK/tessera-link" --version > /dev/null || fail "the launcher does not follow a link"

# An unpacking that stopped half way: the launcher says so instead of a loader error.
partial="$WORK/partial"
mkdir -p "$partial"
size="$(stat -c %s "$WORK/a/$archive")"
head -c "$((size / 2))" "$WORK/a/$archive" | tar -xzf - -C "$partial" 2>/dev/null || true
status=0
"$partial/bin/tessera-worker" --help > /dev/null 2> "$WORK/partial.err" || status=$?
[ "$status" = 2 ] || fail "a half-unpacked bundle exited $status, not 2"
grep -q "incomplete or mixed with another build" "$WORK/partial.err" ||
  fail "a half-unpacked bundle gave: $(cat "$WORK/partial.err")"

cp "$WORK/a/$archive" "$OUT/"
echo "bundle: $OUT/$archive"
