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
               chromium python3-torch python3-torchvision" ;;  # torch: tests/zoo/export.py (test_zoo); chromium: test_report
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
# matters (the examples' npm ci below).
if [ "$set_name" = test ] && ! command -v npm >/dev/null; then missing="$missing npm"; fi

# test: the npm packages of every examples/*/package-lock.json (agents-otel, the otel-*
# framework examples), the exact versions of the lock file; only where node_modules is missing
# or older than the lock file. A failure is not fatal here: the tests that need the packages
# then skip, and fail under CI=true (TU_NEED).
npm_ci() {
  [ "$set_name" = test ] || return 0
  root="$(cd "$(dirname "$0")/.." && pwd)"
  for lock in "$root"/examples/*/package-lock.json; do
    [ -f "$lock" ] || continue
    ex="$(dirname "$lock")" name="examples/$(basename "$(dirname "$lock")")"
    [ -d "$ex/node_modules" ] && [ ! "$lock" -nt "$ex/node_modules" ] && continue
    echo "deps.sh: npm ci in $name" >&2
    if npm ci --prefix "$ex" --no-audit --no-fund --loglevel=error >/dev/null; then
      touch "$ex/node_modules"
    else
      echo "deps.sh: npm ci failed in $name; the tests that need its packages will be skipped (failed under CI=true)" >&2
    fi
  done
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
