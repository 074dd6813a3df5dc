#!/bin/sh
# Run every test binary in $1/tests; print one line per binary and a final tally.
# Each binary is PASS (every case ran and passed), SKIP (none failed, but some cases were
# skipped — cmocka's SKIPPED, from TU_SKIP / TU_NEED in testutil.h — or the whole binary exited
# 77) or FAIL. A SKIP line gives the count of skipped cases and the reasons the test printed.
# The last line is "N passed, N skipped, N failed (test binaries; K test cases skipped)";
# exit status 1 if any failed. In CI (environment CI=true) a test whose declared dependency is
# missing fails (TU_NEED does that inside the test), and so does a binary that exits 77.
build=${1:-build}
# Node 20 that scripts/deps.sh installs where the system's node is older (Debian 12's is 18)
nb="$(cd "$(dirname "$0")/.." && pwd)/build/node/bin"
[ -x "$nb/node" ] && PATH="$nb:$PATH" && export PATH
export FLARE_BIN="$build/flare"   # for tests that drive the CLI
unset CMOCKA_MESSAGE_OUTPUT       # the summary is read from cmocka's standard output format
ci=0
case "${CI:-}" in true|1) ci=1 ;; esac
pass=0; fail=0; skip=0; skipped_cases=0; failed=""
# the sum of N over the lines of $2 that read "$1 N test(s)..." (cmocka's summary; a binary
# with two groups prints two)
count() { sed -n "s/^\[$1\] \([0-9][0-9]*\) test(s).*/\1/p" "$2" | awk '{s += $1} END {print s + 0}'; }
for t in "$build"/tests/test_*; do
  [ -x "$t" ] || continue
  case "$t" in *.d|*.log) continue ;; esac
  name=$(basename "$t")
  log="$build/tests/$name.log"
  start=$(date +%s)
  rc=0; "$t" >"$log" 2>&1 || rc=$?
  secs=$(( $(date +%s) - start ))
  ran=$(count '==========' "$log")
  nskip=$(count '  SKIPPED ' "$log")
  if [ "$rc" -eq 77 ] && [ "$ci" -eq 0 ]; then
    skip=$((skip + 1)); skipped_cases=$((skipped_cases + 1))
    printf '  SKIP %-28s %3ss  whole binary (exit 77)\n' "$name" "$secs"
    grep '^SKIP: ' "$log" | sort -u | sed 's/^SKIP: /       | /'
  elif [ "$rc" -eq 0 ] && [ "$nskip" -gt 0 ]; then
    skip=$((skip + 1)); skipped_cases=$((skipped_cases + nskip))
    printf '  SKIP %-28s %3ss  %d of %d cases skipped (log: %s)\n' "$name" "$secs" "$nskip" "$ran" "$log"
    grep '^SKIP: ' "$log" | sort -u | sed 's/^SKIP: /       | /'
  elif [ "$rc" -eq 0 ]; then
    pass=$((pass + 1)); printf '  PASS %-28s %3ss\n' "$name" "$secs"
  else
    fail=$((fail + 1)); failed="$failed $name"
    if [ "$rc" -eq 77 ]; then
      printf '  FAIL %-28s exit 77 (skipped) under CI=true (log: %s)\n' "$name" "$log"
    else
      printf '  FAIL %-28s (log: %s)\n' "$name" "$log"
    fi
    tail -n 30 "$log" | sed 's/^/       | /'
  fi
done
echo "$pass passed, $skip skipped, $fail failed (test binaries; $skipped_cases test cases skipped)"
[ "$fail" -eq 0 ]
