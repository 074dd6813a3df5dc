#!/bin/sh
# make demo: flare's main job on built-in defaults, at this stage of the project:
# train LeNet-5 on Fashion-MNIST briefly, evaluate it, and show its layer table.
set -eu
flare=${1:-build/flare}
out=${DEMO_OUT:-out/demo}
mkdir -p "$out"
echo "== flare demo: train LeNet-5 on Fashion-MNIST (2 epochs), evaluate, inspect =="
"$flare" nn train --arch lenet5 --data fashion-mnist --epochs 2 --batch 64 --seed 1 \
    --stats "$out/train_stats.jsonl" -o "$out/lenet5.onnx"
echo
"$flare" nn eval --model "$out/lenet5.onnx" --data fashion-mnist:test
echo
"$flare" nn info --model "$out/lenet5.onnx"
echo
echo "model: $out/lenet5.onnx   per-epoch stats: $out/train_stats.jsonl"
