#!/usr/bin/env bash
# Installs everything Tessera needs to build, run and test, from Debian 12 packages only.
# Safe to run repeatedly; skips apt entirely when every package is already present.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates
  libzmq3-dev cppzmq-dev
  libsqlite3-dev sqlite3
  postgresql-15 libpq-dev
  libopenimageio-dev openimageio-tools libtinyobjloader-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libcpp-httplib-dev libboost1.74-dev libssl-dev libsodium-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  povray povray-includes blender ffmpeg prometheus chromium
  python3 python3-pytest python3-yaml python3-pip python3-setuptools
  clang-14 libfuzzer-14-dev libclang-rt-14-dev
  cloud-init shellcheck systemd openssl iproute2
  debootstrap
)
# kubectl (the manifests' kustomize build) is Debian's kubernetes-client, unless one is installed.
command -v kubectl >/dev/null 2>&1 || PACKAGES+=(kubernetes-client)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
