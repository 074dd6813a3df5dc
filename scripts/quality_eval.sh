#!/bin/sh
# The measurements of docs/quality.md: IS and FID of Fashion-MNIST and of the failures of
# short `flare nn fuzz` campaigns (deephunter, dlfuzz, deepsa) against a LeNet-5 trained by
# flare, with the model under test and with a second LeNet-5 (another seed) as the feature
# model. About 6 minutes on 2 cores.
#
#   scripts/quality_eval.sh [OUT_DIR] [EXECS]     (defaults: out/quality, 300000)
set -eu
out=${1:-out/quality}
execs=${2:-300000}
bin=${FLARE:-build/flare}
mkdir -p "$out"

[ -f "$out/lenet5.onnx" ] || "$bin" nn train -a lenet5 -e 2 -s 1 -t 2 -q -o "$out/lenet5.onnx"
[ -f "$out/lenet5_s2.onnx" ] || "$bin" nn train -a lenet5 -e 2 -s 2 -t 2 -q -o "$out/lenet5_s2.onnx"
[ -f "$out/important.json" ] || "$bin" nn lrp -m "$out/lenet5.onnx" -t 2 -q -o "$out/important.json"

for s in deephunter dlfuzz deepsa; do
  [ -d "$out/fz_$s" ] && continue
  extra=""
  [ "$s" = deepsa ] && extra="--important $out/important.json --train fashion-mnist:train"
  # shellcheck disable=SC2086
  "$bin" nn fuzz -m "$out/lenet5.onnx" --seeds fashion-mnist:test --select random -n 100 -s 1 \
    -j 2 --strategy "$s" $extra -E "$execs" -q -o "$out/fz_$s"
done

for f in lenet5 lenet5_s2; do
  echo "== features: $f"
  "$bin" nn quality --real fashion-mnist:test --fake fashion-mnist:train \
    --fake "$out/fz_deephunter/failures" --fake "$out/fz_dlfuzz/failures" \
    --fake "$out/fz_deepsa/failures" --fake "$out/fz_deephunter/queue" \
    --features "$out/$f.onnx" -t 2 -q -o "$out/quality_$f.json"
done
# FID of two real sets as small as the failure sets (FID is biased upward for small sets)
for n in 100 500; do
  echo "== two real sets of $n images"
  "$bin" nn quality --real fashion-mnist:test --fake fashion-mnist:train -n "$n" \
    --features "$out/lenet5.onnx" -t 2 -q
done
