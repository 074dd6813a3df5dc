#!/bin/sh
# flare nn fuzz's DeepHunter throughput against the same loop in PyTorch (bench/fuzz_torch.py),
# interleaved in one run so that both see the same machine load: REPS times, flare's
# `bench_fuzz throughput` (kmnc:100 and nc:0.75), then fuzz_torch.py for each criterion.
# Prints every run's mutants/s, then per criterion the medians and their ratio, and the median
# of flare's floor (its forward pass and coverage update alone, no mutation: no loop beats it).
#
#   bench/fuzz_ratio.sh BUILD DIR MODEL PROFILE THREADS EXECS REPS [BASE_BENCH]
#
# DIR holds the seeds (bench_fuzz writes DIR/seeds.npy + .idx.npy) and flare's output
# folders. BASE_BENCH, another build's bench_fuzz (an older commit), is timed in the same
# interleaving, so that a change can be measured against what it replaced. TORCH_ALT, extra
# fuzz_torch.py flags (e.g. "--pick flat --power k", its loop before it picked as flare does),
# adds a second PyTorch run per criterion, reported as torch_alt.
set -eu
[ $# -ge 7 ] || { echo "usage: $0 BUILD DIR MODEL PROFILE THREADS EXECS REPS [BASE_BENCH]" >&2; exit 2; }
build=$1 dir=$2 model=$3 profile=$4 threads=$5 execs=$6 reps=$7
base=${8:-}
mkdir -p "$dir"
log=$dir/ratio.jsonl
: >"$log"
i=0
while [ "$i" -lt "$reps" ]; do
  i=$((i + 1))
  "$build/bench/bench_fuzz" throughput "$dir" "$model" "$profile" "$threads" "$execs" | sed 's/^{/{"who": "flare", /' | tee -a "$log"
  if [ -n "$base" ]; then
    "$base" throughput "$dir" "$model" "$profile" "$threads" "$execs" | sed 's/^{/{"who": "base", /' | tee -a "$log"
  fi
  for c in kmnc:100 nc:0.75; do
    /usr/bin/python3 bench/fuzz_torch.py "$model" "$dir/seeds.npy" "$dir/seeds.idx.npy" --criterion "$c" \
      --profile "$profile" --threads "$threads" --execs "$execs" --seed 1 | sed 's/^{/{"who": "torch", /' | tee -a "$log"
    if [ -n "${TORCH_ALT:-}" ]; then
      # shellcheck disable=SC2086 # TORCH_ALT is a list of flags
      /usr/bin/python3 bench/fuzz_torch.py "$model" "$dir/seeds.npy" "$dir/seeds.idx.npy" --criterion "$c" \
        --profile "$profile" --threads "$threads" --execs "$execs" --seed 1 $TORCH_ALT \
        | sed 's/^{/{"who": "torch_alt", /' | tee -a "$log"
    fi
  done
done
/usr/bin/python3 - "$log" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for crit in ("kmnc:100", "nc:0.75"):
    v = {w: [r["mutants_per_s"] for r in rows if r["who"] == w and r["criterion"] == crit
             and "mutants_per_s" in r] for w in ("flare", "base", "torch", "torch_alt")}
    fl = [r["inputs_per_s"] for r in rows if r["who"] == "flare" and r["criterion"] == crit
          and "inputs_per_s" in r]
    f, t = statistics.median(v["flare"]), statistics.median(v["torch"])
    print(f"{crit:9s} flare median {f:9.0f} /s ({min(v['flare']):.0f}-{max(v['flare']):.0f})  "
          f"torch median {t:8.0f} /s ({min(v['torch']):.0f}-{max(v['torch']):.0f})  "
          f"ratio {f / t:.2f}x  (target >= 10x, {len(v['flare'])} runs each)")
    if fl:
        m = statistics.median(fl)
        print(f"{'':9s} floor median {m:9.0f} /s (forward + coverage alone, {min(fl):.0f}-{max(fl):.0f})  "
              f"floor / torch {m / t:.2f}x; flare / floor {f / m:.2f}")
    if v["base"]:
        b = statistics.median(v["base"])
        print(f"{'':9s} base  median {b:9.0f} /s ({min(v['base']):.0f}-{max(v['base']):.0f})  "
              f"ratio {b / t:.2f}x; flare / base {f / b:.2f}x")
    if v["torch_alt"]:
        a = statistics.median(v["torch_alt"])
        print(f"{'':9s} torch_alt median {a:8.0f} /s ({min(v['torch_alt']):.0f}-"
              f"{max(v['torch_alt']):.0f})  flare / torch_alt {f / a:.2f}x")
EOF
