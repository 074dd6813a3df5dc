#!/bin/bash
# Build each libFuzzer harness in fuzz/ with clang (ASan+UBSan) and run it for a bounded time
# on its seed corpus. FUZZ_SECONDS (default 10) per harness. Any crash fails the run.
# The library is compiled once (build-fuzz/libflare-fuzz.a) and every harness links it.
set -eu
secs=${FUZZ_SECONDS:-10}
out=build-fuzz
mkdir -p "$out/obj"
gen=build/gen
[ -f "$gen/onnx/onnx.pb-c.c" ] || make --no-print-directory build/gen/onnx/onnx.pb-c.c >/dev/null
pkgs="openblas libprotobuf-c libcjson libpng zlib libcurl"
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
cflags="-g -O1 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I$gen $(pkg-config --cflags $pkgs)"
libs="$(pkg-config --libs $pkgs) -lm -lpthread"

echo "  FUZZ    compiling the library with clang"
objs=""
# an object is stale when its source or any header is newer (a struct that grew in a header
# and old objects that still use its old layout read garbage)
newest_h=$(ls -t include/flare/*.h include/flare/agents/*.h src/*/*.h src/agents/*/*.h | head -n 1)
for f in $(ls src/*/*.c src/agents/*/*.c | grep -v '^src/cli/') "$gen/onnx/onnx.pb-c.c"; do
  o="$out/obj/$(echo "$f" | tr / _).o"
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ "$newest_h" -nt "$o" ]; then
    clang $cflags $san -c "$f" -o "$o" &
    # two compilers at a time
    [ "$(jobs -p | wc -l)" -ge 2 ] && wait -n 2>/dev/null || true
  fi
  objs="$objs $o"
done
wait
rm -f "$out/libflare-fuzz.a"
ar rcs "$out/libflare-fuzz.a" $objs

for h in fuzz/fuzz_*.c; do
  [ -f "$h" ] || continue
  name=$(basename "$h" .c)
  corpus=fuzz/corpus/${name#fuzz_}
  work=$out/$name.corpus
  rm -rf "$work"; mkdir -p "$work"
  [ -d "$corpus" ] && cp "$corpus"/* "$work"/ 2>/dev/null || true
  echo "  FUZZ    $name (${secs}s)"
  clang $cflags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -o "$out/$name" "$h" "$out/libflare-fuzz.a" $libs
  "$out/$name" -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=0 \
    -artifact_prefix="$out/$name-" "$work" >"$out/$name.log" 2>&1 || {
    echo "fuzz: $name failed; see $out/$name.log"; tail -n 40 "$out/$name.log"; exit 1; }
done
echo "fuzz smoke: all harnesses ran clean"
