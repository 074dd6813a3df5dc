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

# ---- flare agents: fuzz the example multi-agent system (examples/agents/) -------------------
echo
echo "== flare agents demo: fuzz the example Master/Worker/Checker system for 20 s =="
examples=$(dirname "$flare")/examples   # built by `make` (the Makefile's $(EXAMPLE) rule)
rm -rf "$out/agents"   # a folder holding a campaign is only resumed (-i -), never overwritten
"$flare" agents fuzz -i examples/agents/seeds -o "$out/agents" --spec examples/agents/spec.json \
    -V "${DEMO_AGENTS_SECONDS:-20}" -s 1 -t 500 -- "$examples/taskforce"
echo "replay the failing cases (exit 1 while any still fails):"
echo "  $flare agents replay $out/agents/failures -- $examples/taskforce"
