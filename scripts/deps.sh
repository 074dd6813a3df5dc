#!/bin/sh
# Install the Debian packages flare needs, only those that are missing.
# Usage: scripts/deps.sh [build|test|bench]   (each set includes the ones before it)
# Idempotent and fast when nothing is missing: one dpkg-query call.
set -eu
set_name=${1:-build}

pkgs="build-essential pkg-config libopenblas-dev protobuf-c-compiler libprotobuf-c-dev
      libonnx-dev zlib1g-dev libpng-dev libcjson-dev libcurl4-openssl-dev
      dataset-fashion-mnist"
case "$set_name" in
  build) ;;
  test)  pkgs="$pkgs libcmocka-dev libonnx-testdata clang libclang-rt-14-dev python3-onnx python3-numpy" ;;
  bench) pkgs="$pkgs libcmocka-dev libonnx-testdata python3-torch python3-onnx python3-numpy python3-scipy time" ;;
  *) echo "deps.sh: unknown package set '$set_name' (build|test|bench)" >&2; exit 2 ;;
esac

missing=""
for p in $pkgs; do
  st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$st" = "installed" ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "deps.sh: installing missing Debian packages:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo";
else echo "deps.sh: need root (or sudo) to install:$missing" >&2; exit 1; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
