#!/usr/bin/env bash
# Packs the worker and the tessera CLI, with every library they load (the C library and its
# dynamic loader included), into tessera-worker-<version>-linux-x86_64.tar.gz in the current
# directory: one archive that runs on any x86_64 Linux, whatever its C library, with nothing
# installed.
#   deploy/bundle.sh [BUILD_DIR]
# BUILD_DIR (default: build-release in the repository) holds the built bin/tessera-worker and
# bin/tessera; deploy/package.sh builds a release and calls this. The libraries are this
# machine's (Debian 12), as its loader resolves them.
#
# Unpack it into a prefix (the cloud-init templates use /usr/local):
#   tar -xzf tessera-worker-<version>-linux-x86_64.tar.gz -C /usr/local --no-same-owner \
#     --no-overwrite-dir
# bin/tessera-worker and bin/tessera are launchers (deploy/bundle/launcher.sh) that start the
# programs in lib/tessera-worker/<version>/ through the bundled loader;
# lib/systemd/system/tessera-worker.service and share/tessera/examples/worker.yaml are as in
# package.sh's archive; share/doc/tessera-worker/ lists every library, where it came from, what
# was left out and why, and holds the libraries' copyright files.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${1:-$repo/build-release}"
programs=(tessera-worker tessera)

[ "$(uname -m)" = x86_64 ] || { echo "bundle: x86_64 only (this is $(uname -m))" >&2; exit 1; }
version="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build_dir/CMakeCache.txt" 2>/dev/null)"
if [ -z "$version" ]; then
  echo "bundle: no project version in $build_dir/CMakeCache.txt" >&2
  exit 1
fi
for program in "${programs[@]}"; do
  [ -x "$build_dir/bin/$program" ] || { echo "bundle: $build_dir/bin/$program is missing" >&2; exit 1; }
done
name="tessera-worker-$version-linux-x86_64"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
payload="lib/tessera-worker/$version"
doc="share/doc/tessera-worker"
install -d -m 0755 "$stage/bin" "$stage/$payload/bin" "$stage/$payload/lib" \
  "$stage/lib/systemd/system" "$stage/share/tessera/examples" "$stage/$doc"
for program in "${programs[@]}"; do
  install -m 0755 --strip "$build_dir/bin/$program" "$stage/$payload/bin/$program"
done
python3 "$repo/deploy/bundle/libraries.py" "$stage/$payload/lib" "$stage/$doc" \
  "${programs[@]/#/$stage/$payload/bin/}"
install -m 0755 "$(readlink -f /lib64/ld-linux-x86-64.so.2)" "$stage/$payload/ld-linux-x86-64.so.2"
chmod 0644 "$stage/$payload"/lib/*
install -m 0644 "$repo/deploy/systemd/tessera-worker.service" "$stage/lib/systemd/system/"
install -m 0644 "$repo/deploy/examples/worker.yaml" "$stage/share/tessera/examples/"

# The launchers know the build they start: a digest of everything under the payload, which the
# archive's last member (bundle-id) repeats.
bundle_id="$(cd "$stage/$payload" && find . -type f -print0 | LC_ALL=C sort -z |
  xargs -0 sha256sum | sha256sum | cut -c1-16)"
for program in "${programs[@]}"; do
  sed -e "s/@PROGRAM@/$program/" -e "s/@VERSION@/$version/" -e "s/@BUNDLE@/$bundle_id/" \
    "$repo/deploy/bundle/launcher.sh" > "$stage/bin/$program"
  chmod 0755 "$stage/bin/$program"
done
echo "$bundle_id" > "$stage/$payload/bundle-id"

# The same sources give the same archive: fixed owner, order and timestamps (the commit's), and
# bundle-id last, so an unpacking that stops part way leaves it missing.
epoch="${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}"
tar_args=(--owner=0 --group=0 --numeric-owner --mtime="@$epoch" --mode="u+rw,go+rX,go-w"
  --format=gnu -C "$stage")
tar "${tar_args[@]}" --sort=name --exclude="./$payload/bundle-id" -cf "$stage/$name.tar" \
  ./bin ./lib ./share
tar "${tar_args[@]}" -rf "$stage/$name.tar" "./$payload/bundle-id"
gzip -9n < "$stage/$name.tar" > "$name.tar.gz"
echo "bundle: $PWD/$name.tar.gz ($(du -k "$name.tar.gz" | cut -f1) KiB; unpacked" \
  "$(du -sk --exclude="$name.tar" "$stage" | cut -f1) KiB)"
