#!/bin/sh
# make demo: flare's main jobs on built-in defaults.
#   neural networks: train LeNet-5 on Fashion-MNIST briefly, evaluate it, show its layers,
#     measure the test set's coverage under each criterion, show the 10 most surprising test
#     inputs as an image grid;
#   nn fuzz: a 30 s DeepHunter campaign on that model (failures grid, report.html);
#   agents: fuzz the example multi-agent system and report what it found.
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
echo "== test adequacy: profile the training set, cover the test set, rank by surprise =="
"$flare" nn profile --model "$out/lenet5.onnx" --data fashion-mnist:train -o "$out/profile.bin"
"$flare" nn lrp --model "$out/lenet5.onnx" --data fashion-mnist:train --ratio 0.4 \
    -o "$out/important.json"
"$flare" nn cover --model "$out/lenet5.onnx" --profile "$out/profile.bin" \
    --data fashion-mnist:test --train fashion-mnist:train --important "$out/important.json" \
    --criteria nc:0.5,kmnc:1000,nbc,snac,tknc:3,tknp,idc,lsc,dsc >"$out/coverage.txt"
sed -n '/^criterion/,/^$/p' "$out/coverage.txt"   # the summary; per-layer tables follow in the file
"$flare" nn sa --kind dsa --model "$out/lenet5.onnx" --layers /relu4/Relu_output_0 \
    --train fashion-mnist:train --test fashion-mnist:test --buckets 1000 \
    --grid "$out/surprising.png" -o "$out/dsa.npy"
echo
echo "model: $out/lenet5.onnx   per-epoch stats: $out/train_stats.jsonl"
echo "coverage per layer: $out/coverage.txt   10 most surprising test inputs: $out/surprising.png"

# ---- flare nn fuzz: generate failing inputs for the demo's model (docs/nn-fuzz.md) ----------
echo
echo "== flare nn fuzz: a ${DEMO_NN_FUZZ_SECONDS:-30}-second DeepHunter campaign guided by KMNC =="
rm -rf "$out/fuzz"   # a folder holding a campaign is only resumed (-i -), never overwritten
"$flare" nn fuzz --model "$out/lenet5.onnx" --seeds fashion-mnist:test --select random -N 100 \
    --strategy deephunter --criterion kmnc:100 --profile "$out/profile.bin" -o "$out/fuzz" \
    -V "${DEMO_NN_FUZZ_SECONDS:-30}" -s 1
echo "failures, seed next to mutant: $out/fuzz/failures.png"

# ---- flare agents: fuzz the example multi-agent system (examples/agents/) -------------------
echo
echo "== flare agents demo: fuzz the example Master/Worker/Checker system for 20 s =="
examples=$(dirname "$flare")/examples   # built by `make` (the Makefile's $(EXAMPLE) rule)
rm -rf "$out/agents"   # a folder holding a campaign is only resumed (-i -), never overwritten
# -t 100: the example answers in about a millisecond, and every case that trips its planted
# hang waits the whole timeout (with -t 500, 36 hangs took 18 of the 20 s: 3 981 cases; with
# -t 100, 13 430 cases and more features)
"$flare" agents fuzz -i examples/agents/seeds -o "$out/agents" --spec examples/agents/spec.json \
    -V "${DEMO_AGENTS_SECONDS:-20}" -s 1 -T 100 -- "$examples/taskforce"
echo "replay the failing cases (exit 1 while any still fails):"
echo "  $flare agents replay $out/agents/failures -- $examples/taskforce"
