#!/bin/sh
# Install the Debian packages flare needs, only those that are missing.
# Usage: scripts/deps.sh [build|test|bench]   (each set includes the ones before it)
# Idempotent and fast when nothing is missing: one dpkg-query call.
set -eu
set_name=${1:-build}

pkgs="build-essential pkg-config libopenblas-dev protobuf-c-compiler libprotobuf-c-dev
      libonnx-dev zlib1g-dev libpng-dev libcjson-dev libcurl4-openssl-dev libmicrohttpd-dev
      dataset-fashion-mnist"
case "$set_name" in
  build) ;;
  test)  pkgs="$pkgs libcmocka-dev libonnx-testdata clang libclang-rt-14-dev python3-onnx python3-numpy nodejs
               python3-torch python3-torchvision" ;;  # torch: tests/zoo/export.py (test_zoo)
  bench) pkgs="$pkgs libcmocka-dev libonnx-testdata python3-torch python3-torchvision python3-onnx python3-numpy
               python3-scipy time" ;;
  *) echo "deps.sh: unknown package set '$set_name' (build|test|bench)" >&2; exit 2 ;;
esac

missing=""
for p in $pkgs; do
  st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$st" = "installed" ] || missing="$missing $p"
done
# npm: Debian packages it apart from nodejs; NodeSource's nodejs bundles it. Only the command
# matters (examples/agents-otel below).
if [ "$set_name" = test ] && ! command -v npm >/dev/null; then missing="$missing npm"; fi

# test: the OpenTelemetry packages of examples/agents-otel, the exact versions of its
# package-lock.json; only when node_modules is missing or older than the lock file.
npm_ci() {
  [ "$set_name" = test ] || return 0
  ex="$(cd "$(dirname "$0")/.." && pwd)/examples/agents-otel"
  [ -f "$ex/package-lock.json" ] || return 0
  if [ ! -d "$ex/node_modules" ] || [ "$ex/package-lock.json" -nt "$ex/node_modules" ]; then
    echo "deps.sh: npm ci in examples/agents-otel" >&2
    if npm ci --prefix "$ex" --no-audit --no-fund --loglevel=error >/dev/null; then
      touch "$ex/node_modules"
    else  # offline: not fatal, tests/test_otel_example.c then skips its otel parts
      echo "deps.sh: npm ci failed in examples/agents-otel; its OpenTelemetry tests will be skipped" >&2
    fi
  fi
}
[ -z "$missing" ] && { npm_ci; exit 0; }

echo "deps.sh: installing missing Debian packages:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo";
else echo "deps.sh: need root (or sudo) to install:$missing" >&2; exit 1; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
npm_ci
