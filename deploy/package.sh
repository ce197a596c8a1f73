#!/usr/bin/env bash
# Builds the release binaries and packs them, with the systemd units and the example configs,
# into tessera-<version>-linux-<arch>.tar.gz in the current directory:
#   deploy/package.sh [BUILD_DIR [CMAKE_ARG...]]
# BUILD_DIR defaults to build-release in the repository; CMAKE_ARGs go to the configure step
# (e.g. -DRENDER_CUDA=ON to insist on the CUDA backend, which is built whenever nvcc is found).
#
# The archive holds bin/, lib/systemd/system/, share/tessera/examples/ and
# share/tessera/cloud-init/, to be unpacked into /usr/local:
#   tar -xzf tessera-<version>-linux-<arch>.tar.gz -C /usr/local --no-same-owner --no-overwrite-dir
# Those binaries link against Debian 12's libraries, so that archive is for Debian 12 machines.
# On x86_64 it also makes tessera-worker-<version>-linux-x86_64.tar.gz (deploy/bundle.sh): the
# worker and the CLI with every library they load, for any x86_64 Linux; the cloud-init
# templates in deploy/cloud-init/ install that one.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="${1:-$repo/build-release}"
shift || true

# Warnings do not fail a release build: GCC 12 at -O3 reports false -Wrestrict positives.
cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WERROR=OFF "$@"
cmake --build "$build_dir" --target tessera-scheduler tessera-worker tessera

version="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build_dir/CMakeCache.txt")"
if [ -z "$version" ]; then
  echo "package: no project version in $build_dir/CMakeCache.txt" >&2
  exit 1
fi
name="tessera-$version-linux-$(uname -m)"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
install -d -m 0755 "$stage/bin" "$stage/lib/systemd/system" "$stage/share/tessera/examples" \
  "$stage/share/tessera/cloud-init"
for program in tessera-scheduler tessera-worker tessera; do
  install -m 0755 --strip "$build_dir/bin/$program" "$stage/bin/$program"
done
install -m 0644 "$repo"/deploy/systemd/*.service "$stage/lib/systemd/system/"
install -m 0644 "$repo"/deploy/examples/*.yaml "$stage/share/tessera/examples/"
# The autoscaler's node groups name these (deploy/autoscaler/*.yaml: cloud_init).
install -m 0644 "$repo"/deploy/cloud-init/*.yaml "$stage/share/tessera/cloud-init/"

# The same sources give the same archive: fixed owner, order and timestamps (the commit's).
epoch="${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
  -C "$stage" -cf - bin lib share | gzip -9n > "$name.tar.gz"
echo "package: $PWD/$name.tar.gz"
tar -tzvf "$name.tar.gz"

if [ "$(uname -m)" = x86_64 ]; then
  "$repo/deploy/bundle.sh" "$build_dir"
fi
