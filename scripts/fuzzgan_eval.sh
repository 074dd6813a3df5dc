#!/bin/sh
# FuzzGAN's evaluation on Fashion-MNIST, with flare (docs/fuzzgan.md). The paper tests
# LeNet-1 on MNIST; these are LeNet-1 and LeNet-5 on Fashion-MNIST: side by side, never the
# same experiment.
#
#   scripts/fuzzgan_eval.sh [OUT] [GAN_EPOCHS] [SEEDS]
#       (defaults: out/fuzzgan-eval, 5 epochs of GAN training, campaign seeds 1..5)
#
# Per model (ARCH in lenet1 lenet5):
# 1. the classifier, trained by flare (5 epochs, -s 1), and its test accuracy;
# 2. its generator: `flare gan train` (GAN_EPOCHS epochs, -s 1), with the time it took; the
#    last epoch's evaluation gives the misclassification rate of generated cases and the mean
#    normalised activation of the target neurons against the same neurons on real images;
# 3. `flare gan fuzz --max-suite 30` for each campaign seed: NC (t = 0.6, meanabs) of the suite
#    and its failures (median over the seeds), and NC against suite size (plot_data);
# 4. a long campaign (--max-suite 3000) whose failures `flare nn retrain` fine-tunes on:
#    clean accuracy and accuracy on held-out failures, before and after;
# 5. with `flare nn quality` (when this build has it): IS and FID of the fuzzgan suite, of
#    deephunter's and dlfuzz's failures (300 000-execution campaigns from 100 test seeds) and of real test
#    images, features from the LeNet-5's penultimate layer.
# Results: OUT/ARCH/*.json and OUT/results.md (Markdown, printed at the end).
set -eu
cd "$(dirname "$0")/.."
out=${1:-out/fuzzgan-eval}
epochs=${2:-5}
seeds=${3:-5}
flare=${FLARE:-build/flare}
[ -x "$flare" ] || make --no-print-directory build/flare >/dev/null
mkdir -p "$out"
py() { /usr/bin/python3 -c "$@"; }
json_get() { py "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
md=$out/results.md
: >"$md"
for arch in lenet1 lenet5; do
  d=$out/$arch
  mkdir -p "$d"
  [ -f "$d/m.onnx" ] || $flare nn train --arch "$arch" --epochs 5 -s 1 -o "$d/m.onnx" -q >/dev/null
  acc=$($flare nn eval -m "$d/m.onnx" -d fashion-mnist:test --json -q | py 'import json,sys; print(json.load(sys.stdin)["accuracy"])')
  if [ ! -f "$d/gen.onnx" ]; then
    t0=$(date +%s)
    $flare gan train -m "$d/m.onnx" -o "$d/gen.onnx" -e "$epochs" -s 1 -q >"$d/gan_train.log"
    echo $(( $(date +%s) - t0 )) >"$d/gan_train.seconds"
  fi
  last=$(tail -n 1 "$d/gen.train/losses.jsonl")
  # 3. suites of at most 30 cases, one per campaign seed
  : >"$d/suites.tsv"
  for s in $(seq 1 "$seeds"); do
    rm -rf "$d/suite$s"
    $flare gan fuzz -m "$d/m.onnx" -g "$d/gen.onnx" --max-suite 30 -o "$d/suite$s" -s "$s" -q >/dev/null
    printf '%s\t%s\t%s\t%s\t%s\n' "$s" "$(json_get "$d/suite$s/summary.json" coverage)" \
      "$(json_get "$d/suite$s/summary.json" corpus)" "$(json_get "$d/suite$s/summary.json" failures)" \
      "$(json_get "$d/suite$s/summary.json" execs)" >>"$d/suites.tsv"
  done
  # 4. retraining on a long campaign's failures
  rm -rf "$d/long"
  $flare gan fuzz -m "$d/m.onnx" -g "$d/gen.onnx" --max-suite 3000 -o "$d/long" -s 1 -q >/dev/null
  $flare nn retrain -m "$d/m.onnx" --extra "$d/long" -o "$d/retrained.onnx" -q >"$d/retrain.txt" 2>&1 || true
  py '
import json, statistics as st, sys
arch, acc, last, tsv, secs, epochs, retrain, longsum = sys.argv[1:9]
L = json.loads(last)
mis, tact, ract, traw, rraw = L["misclass"], L["target_act"], L["real_act"], L["target_raw"], L["real_raw"]
lg = json.load(open(longsum))
rows = [l.split("\t") for l in open(tsv).read().split("\n") if l]
cov = st.median(float(r[1]) for r in rows)
fail = st.median(float(r[3]) / float(r[2]) for r in rows)
lx = lg["execs"]
gen_mis = lg["failures_total"] / lx
rt = "; ".join(l.strip() for l in open(retrain) if l.strip())
print(f"### {arch} (test accuracy {float(acc):.4f})\n")
print(f"| measure | flare, {arch} on Fashion-MNIST | FuzzGAN paper, LeNet-1 on MNIST |")
print("|---|---|---|")
print(f"| GAN training | {epochs} epochs, {int(open(secs).read())} s on this machine | - |")
print(f"| misclassification rate of generated cases (1 024 fixed cases, last epoch) | {100*mis:.1f} % | 53.5 % |")
print(f"| ... of the cases the 3 000-case campaign generated | {100*gen_mis:.1f} % ({lx} cases) | - |")
print(f"| NC (t = 0.6, meanabs) of a suite of <= 30 cases (median) | {100*cov:.1f} % | 98.1 % |")
print(f"| failing cases in that suite (median share) | {100*fail:.1f} % | - |")
print(f"| mean activation of the target neurons vs real images of the class, raw mean abs value | {100*(traw/rraw-1):+.1f} % ({traw:.3g} vs {rraw:.3g}) | +108.9 % |")
print(f"| ... divided by the largest in the layer (L_neuron, NC meanabs) | {100*(tact/ract-1):+.1f} % ({tact:.3f} vs {ract:.3f}) | - |")
print(f"| retraining on a 3 000-case campaign (flare nn retrain) | {rt} | - |")
print()
' "$arch" "$acc" "$last" "$d/suites.tsv" "$d/gan_train.seconds" "$epochs" "$d/retrain.txt" "$d/long/summary.json" >>"$md"
done
# 5. IS / FID, when this build has flare nn quality
if $flare nn quality --help >/dev/null 2>&1; then
  d=$out/lenet5
  for s in deephunter dlfuzz; do
    [ -d "$out/$s" ] || $flare nn fuzz -m "$d/m.onnx" -i fashion-mnist:test --select random -N 100 \
      --strategy "$s" -E 300000 -o "$out/$s" -s 1 -q >/dev/null
  done
  $flare nn quality --real fashion-mnist:test --fake "$d/long/queue" --fake "$out/lenet1/long/queue" \
    --fake "$out/deephunter/failures" --fake "$out/dlfuzz/failures" --features "$d/m.onnx" --json \
    -o "$out/quality.json" -q >/dev/null
  py '
import json, sys
q = json.load(open(sys.argv[1]))
print("### IS / FID (features: %s of the LeNet-5 above, %d values)\n" % (q["layer"], q["dim"]))
print("| set | images | IS | FID against the test set |")
print("|---|---:|---:|---:|")
r = q["real"]
print("| %s (real) | %d | %.2f ± %.2f | - |" % (r["spec"], r["n"], r["is"], r["is_std"]))
for f in q["fake"]:
    print("| %s | %d | %.2f ± %.2f | %.1f |" % (f["spec"], f["n"], f["is"], f["is_std"], f["fid"]))
' "$out/quality.json" >>"$md"
fi
cat "$md"
