#!/bin/bash
# Build each libFuzzer harness in fuzz/ with clang (ASan+UBSan) and run it for a bounded time
# on its seed corpus. FUZZ_SECONDS (default 10) per harness. Any crash fails the run, and so
# does any compile or link failure (of the library or of a harness).
# The library is compiled once (build-fuzz/libflare-fuzz.a) and every harness links it.
set -eu
secs=${FUZZ_SECONDS:-10}
out=build-fuzz
mkdir -p "$out/obj"
gen=build/gen
[ -f "$gen/onnx/onnx.pb-c.c" ] || make --no-print-directory build/gen/onnx/onnx.pb-c.c >/dev/null
[ -f "$gen/otlp/otlp_trace.pb-c.c" ] || make --no-print-directory build/gen/otlp/otlp_trace.pb-c.h >/dev/null
pkgs="openblas libprotobuf-c libcjson libpng zlib libcurl libmicrohttpd"
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
cflags="-g -O1 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I$gen $(pkg-config --cflags $pkgs)"
libs="$(pkg-config --libs $pkgs) -lm -lpthread"

echo "  FUZZ    compiling the library with clang"
objs=""
# an object is stale when its source or any header is newer (a struct that grew in a header
# and old objects that still use its old layout read garbage). A stale object is removed before
# it is rebuilt, and a new one is written under a temporary name and renamed only when clang
# succeeds: a compile failure fails the run, it never leaves the old object to be linked.
newest_h=$(ls -t include/flare/*.h include/flare/agents/*.h src/*/*.h src/agents/*/*.h | head -n 1)
compile() {  # source object
  if clang $cflags $san -c "$1" -o "$2.tmp" 2>"$2.err"; then
    mv "$2.tmp" "$2"; cat "$2.err" >&2; rm -f "$2.err"
  else
    rm -f "$2.tmp"; echo "fuzz: cannot compile $1:" >&2; cat "$2.err" >&2; return 1
  fi
}
pids=(); failed=0
for f in $(ls src/*/*.c src/agents/*/*.c | grep -v '^src/cli/') "$gen/onnx/onnx.pb-c.c" "$gen/otlp/otlp_trace.pb-c.c"; do
  o="$out/obj/$(echo "$f" | tr / _).o"
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ "$newest_h" -nt "$o" ]; then
    rm -f "$o"
    compile "$f" "$o" &
    pids+=($!)
    # two compilers at a time: wait for the oldest, keeping its exit status
    if [ "${#pids[@]}" -ge 2 ]; then wait "${pids[0]}" || failed=1; pids=("${pids[@]:1}"); fi
  fi
  objs="$objs $o"
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
if [ "$failed" -ne 0 ]; then echo "fuzz: the library did not compile; no harness was built" >&2; exit 1; fi
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
  rm -f "$out/$name"
  clang $cflags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -o "$out/$name" "$h" "$out/libflare-fuzz.a" $libs || {
    echo "fuzz: cannot build $name" >&2; exit 1; }
  "$out/$name" -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=0 \
    -artifact_prefix="$out/$name-" "$work" >"$out/$name.log" 2>&1 || {
    echo "fuzz: $name failed; see $out/$name.log"; tail -n 40 "$out/$name.log"; exit 1; }
done
echo "fuzz smoke: all harnesses ran clean"
