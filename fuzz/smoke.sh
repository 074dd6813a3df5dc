#!/bin/sh
# Build each libFuzzer harness in fuzz/ with clang (ASan+UBSan) and run it for a bounded time
# on its seed corpus. FUZZ_SECONDS (default 15) per harness. Any crash fails the run.
set -eu
secs=${FUZZ_SECONDS:-15}
out=build-fuzz
mkdir -p "$out"
gen=build/gen
[ -f "$gen/onnx/onnx.pb-c.c" ] || make --no-print-directory build/gen/onnx/onnx.pb-c.c >/dev/null
libsrc=$(ls src/*/*.c | grep -v '^src/cli/')
cflags="-g -O1 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I$gen $(pkg-config --cflags openblas libprotobuf-c libcjson libpng zlib)"
libs="$(pkg-config --libs openblas libprotobuf-c libcjson libpng zlib libcurl) -lm -lpthread"
for h in fuzz/fuzz_*.c; do
  [ -f "$h" ] || continue
  name=$(basename "$h" .c)
  corpus=fuzz/corpus/${name#fuzz_}
  work=$out/$name.corpus
  rm -rf "$work"; mkdir -p "$work"
  [ -d "$corpus" ] && cp "$corpus"/* "$work"/ 2>/dev/null || true
  echo "  FUZZ    $name (${secs}s)"
  clang $cflags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -o "$out/$name" "$h" $libsrc "$gen/onnx/onnx.pb-c.c" $libs
  "$out/$name" -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=0 \
    -artifact_prefix="$out/$name-" "$work" >"$out/$name.log" 2>&1 || {
    echo "fuzz: $name failed; see $out/$name.log"; tail -n 40 "$out/$name.log"; exit 1; }
done
echo "fuzz smoke: all harnesses ran clean"
