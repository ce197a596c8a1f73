#!/usr/bin/env bash
# Prints the path of a cached Debian root file system, making it with debootstrap first when
# the cache lacks it:
#   tests/deploy/rootfs.sh RELEASE VARIANT     e.g. bullseye minbase
# VARIANT minbase: the base system and nothing else (no library beyond it); cloud: minbase plus
# what the cloud-init templates use on a cloud image (curl, CA certificates, systemd).
# The package source is the first Debian one in this machine's apt configuration. The cache
# (TESSERA_ROOTFS_CACHE, default /var/cache/tessera-rootfs) keeps RELEASE-VARIANT/root until
# the debootstrap arguments change; parallel callers wait for one another.
# Exit 77 (a skip) with the reason on stderr when there is no package source or it cannot be
# reached; any other failure exits 1.
set -euo pipefail

release="${1:?release}"
variant="${2:?variant}"
cache="${TESSERA_ROOTFS_CACHE:-/var/cache/tessera-rootfs}"
case "$variant" in
  minbase) args=(--variant=minbase) ;;
  cloud) args=(--variant=minbase "--include=ca-certificates,curl,systemd") ;;
  *) echo "rootfs: unknown variant $variant (minbase or cloud)" >&2; exit 1 ;;
esac
skip() {
  echo "rootfs: SKIP: $*" >&2
  exit 77
}

# shellcheck disable=SC2016  # $(REPO_URI) is apt's field, not the shell's
mirror="$(apt-get indextargets --format '$(REPO_URI)' 'Identifier: Packages' 'Label: Debian' \
  2>/dev/null | head -n 1)"
[ -n "$mirror" ] || skip "no Debian package source in this machine's apt configuration"
args+=("$release")
dir="$cache/$release-$variant"
stamp="debootstrap ${args[*]} (package source: $mirror)"

mkdir -p "$cache"
exec 9>"$cache/$release-$variant.lock"
flock 9
if [ -f "$dir/stamp" ] && [ "$(cat "$dir/stamp")" = "$stamp" ]; then
  echo "$dir/root"
  exit 0
fi

if ! why="$(curl -fsS --max-time 30 -o /dev/null "${mirror%/}/dists/$release/Release" 2>&1)"; then
  skip "the package source $mirror cannot be reached ($why)"
fi
command -v debootstrap >/dev/null || { echo "rootfs: debootstrap is not installed" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir"
echo "rootfs: $stamp into $dir (once per machine)" >&2
if ! debootstrap "${args[@]}" "$dir/root" "$mirror" > "$dir/debootstrap.log" 2>&1; then
  tail -n 20 "$dir/debootstrap.log" >&2
  echo "rootfs: debootstrap failed (log: $dir/debootstrap.log)" >&2
  exit 1
fi
chroot "$dir/root" apt-get clean
echo "$stamp" > "$dir/stamp"
echo "$dir/root"
