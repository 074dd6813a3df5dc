#!/bin/sh
# Run every test binary in $1/tests; print one line per binary and a final tally.
# The last line is "N passed, N failed" (counting test binaries); exit status 1 if any failed.
build=${1:-build}
export FLARE_BIN="$build/flare"   # for tests that drive the CLI
pass=0; fail=0; failed=""
for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  log="$build/tests/$name.log"
  start=$(date +%s)
  if "$t" >"$log" 2>&1; then
    pass=$((pass + 1)); printf '  PASS %-28s %3ss\n' "$name" $(( $(date +%s) - start ))
  else
    fail=$((fail + 1)); failed="$failed $name"
    printf '  FAIL %-28s (log: %s)\n' "$name" "$log"
    tail -n 30 "$log" | sed 's/^/       | /'
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
