#!/bin/sh
# make bench: flare's engine against named baselines; prints ratios and the targets.
#   - throughput vs PyTorch CPU (Debian python3-torch), same architecture, batch, threads
#   - a large convolution, and ResNet-18's largest two, vs a bare OpenBLAS sgemm of the same M, N, K
#   - torchvision ResNet-18 / MobileNetV2 / EfficientNet-B0 inference (batch 32, 64x64, random
#     weights exported to ONNX at bench time) vs the same models in PyTorch, alternated
#     BENCH_ZOO_ROUNDS (3) times, medians
#   - the same zoo at ImageNet size (3x224x224: ResNet-18, ResNet-50, MobileNetV2,
#     EfficientNet-B0, VGG-16; batch 1, 8, 32; exported at opset 17 now) against PyTorch's frozen
#     model (torch.jit.freeze of the scripted eval model: BatchNorm folded, as in the export):
#     images/s, load time against onnx.load of the same file, time to the first output, peak
#     RSS per (model, batch) in its own process; coverage (every structural criterion on three
#     layers of ResNet-50) and LSA/DSA against the forward pass; a gradient step (forward +
#     backward to the input) on ResNet-18 against torch autograd. BENCH_QUICK=1: batch 1 and 8,
#     fewer repetitions; BENCH_BIG=0 skips the section; BENCH_BIG_MODELS picks the models
#   - peak RSS of `flare nn train` (LeNet-5, Fashion-MNIST, 1 epoch), measured by /usr/bin/time
#   - LeNet-5 test accuracy after 10 epochs of the default recipe (skip: BENCH_QUICK=1)
#   - nn fuzz: DeepHunter mutants/s vs the same loop in PyTorch (bench/fuzz_torch.py), guidance
#     (deephunter vs random, median of 5 seeds), TensorFuzz's nearest-neighbour search
#   - LSA / DSA of Fashion-MNIST test vs train vs sadl's numpy+scipy way (bench/sa_baseline.py)
#   - flare agents: the target runner's cost per case against the machine's own floor, measured
#     in the same run (bench/bench_floor.c: a bare pipe round trip, a bare fork + exec + wait)
# Raw results go to build/bench/results.jsonl. Every row of the summary is printed; a row
# whose measurement or baseline is absent says "not measured: <why>".
set -eu
build=${1:-build}
threads=${BENCH_THREADS:-2}
res=$build/bench/results.jsonl
mkdir -p "$build/bench/tmp"
: >"$res"

echo "== flare engine ($threads threads) =="
"$build/bench/bench_nn" "$threads" | tee -a "$res"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "== baseline: PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)') CPU ($threads threads) =="
  /usr/bin/python3 bench/torch_bench.py "$threads" | sed 's/"name": "/"name": "torch_/' | tee -a "$res"
else
  echo "(python3-torch not installed: no PyTorch baseline)"
fi

zoo_models="resnet18 mobilenet_v2 efficientnet_b0"
if /usr/bin/python3 -c "import torch, torchvision" 2>/dev/null; then
  echo "== torchvision zoo inference, batch 32 of 3x64x64 ($threads threads): $zoo_models, random weights, exported to ONNX now; flare and PyTorch alternated, ${BENCH_ZOO_ROUNDS:-3} rounds of medians of 5 runs =="
  zoo=$build/bench/tmp/zoo
  /usr/bin/python3 bench/torch_bench.py export "$zoo" $zoo_models || echo "(torch could not export the zoo: no zoo rows)"
  echo "{\"name\": \"zoo_load_before\", \"loadavg\": $(cut -d' ' -f1 /proc/loadavg)}" | tee -a "$res"
  for round in $(seq "${BENCH_ZOO_ROUNDS:-3}"); do
    "$build/bench/bench_nn" zoo "$zoo" "$threads" 5 $zoo_models | tee -a "$res"
    /usr/bin/python3 bench/torch_bench.py zoo "$threads" 5 $zoo_models | sed 's/"name": "/"name": "torch_/' | tee -a "$res"
  done
  echo "{\"name\": \"zoo_load_after\", \"loadavg\": $(cut -d' ' -f1 /proc/loadavg)}" | tee -a "$res"
else
  echo "(python3-torch or python3-torchvision not installed: no zoo models to run)"
fi

big_models=${BENCH_BIG_MODELS:-resnet18 resnet50 mobilenet_v2 efficientnet_b0 vgg16}
big_batches=1,8,32; big_reps=5; big_gbatch=8
if [ "${BENCH_QUICK:-0}" = 1 ]; then big_batches=1,8; big_reps=3; big_gbatch=1; fi
if [ "${BENCH_BIG:-1}" = 0 ]; then
  echo "(BENCH_BIG=0: no 224x224 section)"
elif /usr/bin/python3 -c "import torch, torchvision, onnx" 2>/dev/null; then
  big_t0=$(date +%s)
  big=$build/bench/tmp/big
  rm -rf "$big"
  echo "== torchvision zoo at 3x224x224, batch $big_batches ($threads threads): $big_models; random weights (seed 0), exported to ONNX at opset 17 now; flare vs PyTorch's frozen model (torch.jit.freeze(torch.jit.script(model.eval())), no_grad: BatchNorm folded on both sides), medians of $big_reps runs after warm-up =="
  /usr/bin/python3 bench/torch_bench.py export "$big" --side=224 --opset=17 --npy=$big_batches $big_models \
    || echo "(torch could not export the 224x224 zoo: no rows)"
  echo "{\"name\": \"big_load_before\", \"loadavg\": $(cut -d' ' -f1 /proc/loadavg)}" | tee -a "$res"
  for round in $(seq "${BENCH_BIG_ROUNDS:-1}"); do
    "$build/bench/bench_nn" big "$big" 224 "$threads" "$big_reps" "$big_batches" $big_models | tee -a "$res"
    /usr/bin/python3 bench/torch_bench.py big "$big" 224 "$threads" "$big_reps" "$big_batches" $big_models \
      | sed 's/"name": "/"name": "torch_/' | tee -a "$res"
  done
  echo "-- peak RSS, one process per (model, batch): flare nn run --scale none, and the frozen model in PyTorch (2 passes; the process's peak, torch's own libraries included), /usr/bin/time -f %M --"
  for m in $big_models; do
    for b in $(echo "$big_batches" | tr , ' '); do
      if /usr/bin/time -f %M -o "$big/rss" "$build/flare" nn run -m "$big/$m.onnx" -i "$big/x$b.npy" \
           --scale none -o "$big/out.npy" -t "$threads" -q >/dev/null 2>"$big/rss.err"; then
        echo "{\"name\": \"rss_flare_${m}_b$b\", \"kb\": $(tail -n 1 "$big/rss")}" | tee -a "$res"
      else
        echo "(flare nn run $m batch $b failed: $(tail -n 1 "$big/rss.err"))"
      fi
      if /usr/bin/time -f %M -o "$big/rss" /usr/bin/python3 bench/torch_bench.py rss 224 "$threads" "$b" "$m" \
           >/dev/null 2>"$big/rss.err"; then
        echo "{\"name\": \"rss_torch_${m}_b$b\", \"kb\": $(tail -n 1 "$big/rss")}" | tee -a "$res"
      fi
    done
  done
  case " $big_models " in *" resnet50 "*)
    echo "-- coverage (nc:0.5,kmnc:1000,nbc,snac,tknc:3,tknp) on three ResNet-50 block outputs (layer2, layer3, layer4: 3584 neurons), and LSA / DSA of layer2's 512 channel means against 10 000 synthetic training traces, vs the forward pass of the same batch of 8 (wall clock) --"
    "$build/bench/bench_cover" big "$big/resnet50.onnx" 224 "$threads" 8 "$big_reps" \
      /layer2/layer2.3/relu_2/Relu_output_0,/layer3/layer3.5/relu_2/Relu_output_0,/layer4/layer4.2/relu_2/Relu_output_0 \
      /layer2/layer2.3/relu_2/Relu_output_0 10000 | tee -a "$res" ;;
  esac
  case " $big_models " in *" resnet18 "*)
    echo "-- gradient step: forward + backward to the input of sum(logits * seed), ResNet-18, batch $big_gbatch: flare vs torch autograd (eager, x.requires_grad_()) --"
    "$build/bench/bench_nn" grad "$big" 224 "$threads" "$big_reps" "$big_gbatch" resnet18 | tee -a "$res"
    /usr/bin/python3 bench/torch_bench.py grad 224 "$threads" "$big_reps" "$big_gbatch" resnet18 \
      | sed 's/"name": "/"name": "torch_/' | tee -a "$res" ;;
  esac
  echo "{\"name\": \"big_load_after\", \"loadavg\": $(cut -d' ' -f1 /proc/loadavg)}" | tee -a "$res"
  echo "{\"name\": \"big_section\", \"seconds\": $(( $(date +%s) - big_t0 )), \"quick\": ${BENCH_QUICK:-0}}" | tee -a "$res"
else
  echo "(python3-torch, python3-torchvision or python3-onnx not installed: no 224x224 section)"
fi

echo "== coverage update cost vs the forward pass (LeNet-5, batch 256, 1 thread: CPU time) =="
"$build/bench/bench_cover" 1 | tee -a "$res"

if [ -x "$build/bench/bench_agents_target" ]; then
  echo "== flare agents: per-case cost of the target runner, against this machine's floor (bench_floor: a bare 30-byte pipe round trip, a bare fork + exec + wait), measured before and after =="
  cc -O2 -o "$build/bench/agent_tgt" tests/targets/agent_tgt.c   # as bench_agents_target builds it
  "$build/bench/bench_floor" 20000 "$build/bench/agent_tgt" done | tee -a "$res"
  "$build/bench/bench_agents_target" | tee -a "$res"
  "$build/bench/bench_floor" 20000 "$build/bench/agent_tgt" done | tee -a "$res"
fi

echo "== peak RSS: flare nn train --arch lenet5, 1 epoch =="
/usr/bin/time -f '%M' -o "$build/bench/tmp/rss" "$build/flare" nn train --arch lenet5 \
  --data fashion-mnist --epochs 1 --batch 64 --seed 1 --threads "$threads" \
  -o "$build/bench/tmp/rss.onnx" >/dev/null 2>&1
echo "{\"name\": \"lenet5_train_peak_rss\", \"kb\": $(tail -n 1 "$build/bench/tmp/rss")}" | tee -a "$res"

if [ "${BENCH_QUICK:-0}" != 1 ]; then
  echo "== accuracy: default recipe, LeNet-5, Fashion-MNIST, 10 epochs =="
  "$build/flare" nn train --arch lenet5 --data fashion-mnist --epochs 10 --seed 1 \
    --threads "$threads" --stats "$build/bench/tmp/acc.jsonl" -o "$build/bench/tmp/acc.onnx" \
    >/dev/null 2>&1
  tail -n 1 "$build/bench/tmp/acc.jsonl" | sed 's/^{/{"name": "lenet5_10ep", /' | tee -a "$res"
fi

echo "== surprise adequacy: Fashion-MNIST test (10 000) vs train (60 000), LeNet-5 relu4 (84) =="
sa_dir=$build/bench/tmp/sa
sa_model=$build/bench/tmp/rss.onnx
[ "${BENCH_QUICK:-0}" != 1 ] && sa_model=$build/bench/tmp/acc.onnx
"$build/bench/bench_sa" dump "$sa_dir" "$sa_model" 2>/dev/null
"$build/bench/bench_sa" run "$sa_dir" "$threads" | tee -a "$res"
if /usr/bin/python3 -c "import scipy" 2>/dev/null; then
  echo "== baseline: sadl's LSA/DSA in numpy + scipy $(/usr/bin/python3 -c 'import scipy; print(scipy.__version__)') (first ${BENCH_SA_SUBSET:-500} test inputs timed, extrapolated to 10 000) =="
  /usr/bin/python3 bench/sa_baseline.py "$sa_dir" "$threads" "${BENCH_SA_SUBSET:-500}" | tee -a "$res"
else
  echo "(python3-scipy not installed: no sadl baseline)"
fi

echo "== flare nn fuzz: DeepHunter mutants/s with coverage feedback, flare vs the same loop in PyTorch (LeNet-5, 100 seeds) =="
fz=$build/bench/tmp/fuzz
mkdir -p "$fz"
"$build/flare" nn profile --model "$sa_model" --data fashion-mnist:train -o "$fz/profile.bin" -q >/dev/null
"$build/bench/bench_fuzz" throughput "$fz" "$sa_model" "$fz/profile.bin" "$threads" "${BENCH_FUZZ_EXECS:-30000}" | tee -a "$res"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  for c in kmnc:100 nc:0.75; do
    /usr/bin/python3 bench/fuzz_torch.py "$sa_model" "$fz/seeds.npy" "$fz/seeds.idx.npy" --criterion "$c" \
      --profile "$fz/profile.bin" --threads "$threads" --execs "${BENCH_FUZZ_EXECS:-30000}" --seed 1 \
      | sed 's/"name": "/"name": "torch_/' | tee -a "$res"
  done
else
  echo "(python3-torch not installed: no PyTorch baseline)"
fi
echo "== flare nn fuzz: deephunter vs random at equal budgets (median of 5 seeds) =="
"$build/bench/bench_fuzz" guidance "$fz" "$sa_model" "$fz/profile.bin" 5 "${BENCH_FUZZ_EXECS:-30000}" 2>>"$res"
echo "== flare nn fuzz: gradient-guided steps/s (forward + backward + acceptance, 64 lanes), flare vs the same loop with torch autograd =="
"$build/bench/bench_fuzz" grad "$fz" "$sa_model" "$threads" "${BENCH_GRAD_EXECS:-20000}" | tee -a "$res"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  for s in pgd dlfuzz; do
    /usr/bin/python3 bench/grad_torch.py "$sa_model" "$fz/seeds.npy" "$fz/seeds.idx.npy" --strategy "$s" \
      --threads "$threads" --execs "${BENCH_GRAD_EXECS:-20000}" --seed 1 \
      | sed 's/"name": "grad_/"name": "torch_grad_/' | tee -a "$res"
  done
fi
echo "== TensorFuzz nearest-neighbour search (exact, blocked sgemm), batch of 64, 10 logits =="
"$build/bench/bench_fuzz" nn 10 | tee -a "$res"

echo "== FuzzGAN: one training step (D step + G step through the model under test, batch 128), flare vs the same step in PyTorch; fuzzgan cases/s vs its forward passes alone =="
gan=$build/bench/tmp/gan
mkdir -p "$gan"
"$build/flare" nn train --arch lenet1 --data fashion-mnist --epochs 1 --seed 1 --threads "$threads" \
  -o "$gan/lenet1.onnx" -q >/dev/null 2>&1
"$build/bench/bench_gan" train "$gan/lenet1.onnx" "$threads" 60 | tee -a "$res"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  /usr/bin/python3 bench/gan_torch.py "$gan/lenet1.onnx" --threads "$threads" --batches 60 | tee -a "$res"
fi
"$build/flare" gan train -m "$gan/lenet1.onnx" -o "$gan/gen.onnx" -e 1 --max-batches 100 -s 1 \
  -t "$threads" -q >/dev/null 2>&1
"$build/bench/bench_gan" fuzz "$gan/lenet1.onnx" "$gan/gen.onnx" "$threads" "${BENCH_GAN_EXECS:-20000}" | tee -a "$res"

echo "== flare agents: --schedule explore vs --schedule none on examples/agents (executions to every planted defect + every allowed edge, median of 5 seeds) =="
mkdir -p "$build/examples"
cc -std=c11 -O2 -Wall -Wextra -Werror -o "$build/examples/taskforce" examples/agents/*.c -lcjson -lm
"$build/bench/bench_agents_guidance" "$build/examples/taskforce" examples/agents/spec.json \
  examples/agents/seeds "$build/bench/tmp/agents_guidance" 5 20000 100 | tee -a "$res"

echo "== flare agents: planted defects found in 3000 executions, no LLM, examples/systems (median of 5 seeds, explore and none) =="
# each planted defect as the start of its findings' key (a same-kind finding on another path,
# a side effect of another defect, does not count): bench/bench_agents_guidance.c
for sys in "helpdesk forbidden_output:api-key,crash:-6:Refunds,tool_error:Refunds/issue_refund,loop,hang:Refunds,spec_violation:agent:Admin,empty_output,no_output" \
           "coder loop,spec_violation:agent:Deployer,output_length,crash:-6:Coder,forbidden_output:api-key,no_output,tool_error:Coder/run_tests,hang:Coder" \
           "pipeline crash:-6:Ingest,tool_error:Transform/convert_units,hang:Transform,loop,spec_violation:agent:Archiver,forbidden_output:api-key,output_length,empty_output"; do
  set -- $sys
  [ -x "$build/examples/$1" ] || make --no-print-directory "$build/examples/$1" >/dev/null
  "$build/bench/bench_agents_guidance" defects "$1" "$2" "$build/examples/$1" \
    "examples/systems/$1/spec.json" "examples/systems/$1/seeds" "$build/bench/tmp/agents_defects" \
    5 "${BENCH_DEFECT_EXECS:-3000}" 300 | tee -a "$res"
done

echo "== flare agents: share of case time lost to timeouts, 3000 execs, calibrated timeout (median of 5 seeds; examples/systems/scheduler is made for hangs) =="
[ -x "$build/examples/scheduler" ] || make --no-print-directory "$build/examples/scheduler" >/dev/null
"$build/bench/bench_agents_guidance" hangs scheduler "$build/examples/scheduler" \
  examples/systems/scheduler/spec.json examples/systems/scheduler/seeds "$build/bench/tmp/agents_hangs" \
  5 "${BENCH_HANG_EXECS:-3000}" | tee -a "$res"
# the same system when each agent message waits 2 ms, as for a (very fast) model: the share
# is set by how a hang compares with a normal case (docs/agents-campaign.md)
SYS_STEP_MS=2 "$build/bench/bench_agents_guidance" hangs scheduler_step2ms "$build/examples/scheduler" \
  examples/systems/scheduler/spec.json examples/systems/scheduler/seeds "$build/bench/tmp/agents_hangs" \
  5 "${BENCH_HANG_EXECS:-3000}" | tee -a "$res"
# a system that takes 300 ms to start (as an interpreter loading a framework), with and without
# the spare process a restart takes: the wall time ("seconds") is what the spare saves
for spare in 0 1; do
  SYS_START_MS=300 SYS_STEP_MS=2 "$build/bench/bench_agents_guidance" hangs scheduler_start300ms_spare$spare \
    "$build/examples/scheduler" examples/systems/scheduler/spec.json examples/systems/scheduler/seeds \
    "$build/bench/tmp/agents_hangs" 3 "${BENCH_SLOW_EXECS:-1000}" 0 $spare | tee -a "$res"
done
"$build/bench/bench_agents_guidance" hangs taskforce "$build/examples/taskforce" \
  examples/agents/spec.json examples/agents/seeds "$build/bench/tmp/agents_hangs" \
  5 "${BENCH_HANG_EXECS:-3000}" | tee -a "$res"

echo "== flare agents: executions to every allowed edge, LLM generator off / on (a stand-in model on loopback, tests/llm_stub.c: instructions from the words of the gap the prompt names), examples/systems, median of 5 seeds =="
for sys in helpdesk coder; do
  [ -x "$build/examples/$sys" ] || make --no-print-directory "$build/examples/$sys" >/dev/null
  "$build/bench/bench_agents_llm" "$sys" "$build/examples/$sys" "examples/systems/$sys/spec.json" \
    "examples/systems/$sys/seeds" "$build/bench/tmp/agents_llm" 5 "${BENCH_LLM_EXECS:-5000}" 300 200 | tee -a "$res"
done

have_torch=0; /usr/bin/python3 -c "import torch" 2>/dev/null && have_torch=1
have_scipy=0; /usr/bin/python3 -c "import scipy" 2>/dev/null && have_scipy=1
/usr/bin/python3 - "$res" "$have_torch" "$have_scipy" "${BENCH_QUICK:-0}" "$threads" \
  "${BENCH_BIG:-1}" "$big_models" "$big_batches" <<'PY'
import json, sys
r = {}
allv = {}  # every line of a name (the 224x224 rounds): the summary takes the median
floors = {}
rounds = {}  # the zoo's alternated rounds: every one kept, the summary takes the median
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        d = json.loads(line)
        if d["name"].startswith("floor_"):  # measured before and after: keep both
            floors.setdefault(d["name"], []).append(d)
        if "zoo_" in d["name"]:
            rounds.setdefault(d["name"], []).append(d)
        allv.setdefault(d["name"], []).append(d)
        r[d["name"]] = d
have_torch, have_scipy, quick = sys.argv[2] == "1", sys.argv[3] == "1", sys.argv[4] == "1"
def why(needs=None):
    if needs == "torch" and not have_torch:
        return "python3-torch not installed (scripts/deps.sh bench)"
    if needs == "scipy" and not have_scipy:
        return "python3-scipy not installed (scripts/deps.sh bench)"
    if needs == "quick" and quick:
        return "BENCH_QUICK=1 skips it"
    return "its benchmark reported nothing (see its output above)"
def row(what, value, target, ok):
    print(f"  {what:<56} {value:>14}   target {target:<8} {'ok' if ok else 'MISSED'}")
def missing(what, target, reason):
    print(f"  {what:<56} {'':>14}   target {target:<8} not measured: {reason}")
def info(what, value):
    print(f"  {what:<56} {value:>14}")
print("\n== summary ==")
for k, tgt in (("lenet5_train_b64", 3.0), ("lenet5_infer_b256", 2.0)):
    what = f"{k}: flare/PyTorch images/s"
    if k in r and "torch_" + k in r:
        ratio = r[k]["images_per_s"] / r["torch_" + k]["images_per_s"]
        row(what, f"{ratio:.2f}x", f">= {tgt}x", ratio >= tgt)
    else:
        missing(what, f">= {tgt}x", why("torch" if k in r else None))
for k in ("fuzz_deephunter_kmnc", "fuzz_deephunter_nc"):
    what = f"{k}: flare/PyTorch mutants/s"
    if k in r and "torch_" + k in r:
        ratio = r[k]["mutants_per_s"] / r["torch_" + k]["mutants_per_s"]
        row(what, f"{ratio:.2f}x", ">= 10x", ratio >= 10)
    else:
        missing(what, ">= 10x", why("torch" if k in r else None))
    fl = r.get(k.replace("deephunter", "floor"))
    if k in r and fl:
        info(f"{k}: flare loop / forward+coverage floor", f"{r[k]['mutants_per_s'] / fl['inputs_per_s']:.2f}")
        if "torch_" + k in r:
            info(f"{k}: floor / PyTorch loop (no loop passes it)",
                 f"{fl['inputs_per_s'] / r['torch_' + k]['mutants_per_s']:.2f}x")
for s in ("pgd", "dlfuzz"):
    f, t = r.get(f"grad_flare_{s}"), r.get(f"torch_grad_{s}")
    what = f"{s}: flare/torch-autograd gradient steps/s"
    if f and t:
        ratio = f["steps_per_s"] / t["steps_per_s"]
        row(what, f"{ratio:.2f}x", ">= 3x", ratio >= 3)
    else:
        missing(what, ">= 3x", why("torch" if f else None))
for s in ("reference", "exact"):
    f = r.get(f"grad_flare_deepsa_dsa_{s}")
    what = f"deepsa ({s}): SA share of a round, 60 000 traces"
    if f:
        info(what, f"{100 * f['sa_share']:.1f} %")
    else:
        missing(what, "-", why())
for c in ("kmnc:100", "nc:0.75"):
    g, b = r.get(f"guidance_{c}_deephunter"), r.get(f"guidance_{c}_random")
    what = f"deephunter vs random, {c}: coverage / failures"
    if g and b:
        ok = g["coverage"] > b["coverage"] and g["failures"] > b["failures"]
        row(what, f"{g['coverage']:.1f}/{b['coverage']:.1f}% {g['failures']:.0f}/{b['failures']:.0f}", "both >", ok)
    else:
        missing(what, "both >", why())
f, t = r.get("gan_train_flare"), r.get("gan_train_torch")
what = "FuzzGAN training step: torch s / flare s (batch 128)"
if f and t:
    ratio = t["s_per_batch"] / f["s_per_batch"]
    row(what, f"{ratio:.2f}x", "> 1x", ratio > 1)
else:
    missing(what, "> 1x", why("torch" if f else None))
g = r.get("gan_fuzz_flare")
what = "fuzzgan cases/s / its forward passes alone"
if g:
    ratio = g["cases_per_s"] / g["floor_cases_per_s"]
    info(what, f"{ratio*100:.0f}% ({g['cases_per_s']:.0f}/{g['floor_cases_per_s']:.0f}/s)")
else:
    missing(what, "-", why())
def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
for k in ("resnet18", "mobilenet_v2", "efficientnet_b0"):
    f, t = rounds.get(f"zoo_{k}_b32"), rounds.get(f"torch_zoo_{k}_b32")
    what = f"{k} b32 64x64: flare/PyTorch images/s"
    if f and t:
        fm = median([d["images_per_s"] for d in f])
        tm = median([d["images_per_s"] for d in t])
        row(what, f"{fm / tm:.2f}x ({fm:.0f}/{tm:.0f})", ">= 1.0x", fm >= tm)
    else:
        missing(what, ">= 1.0x", why() if f or t else
                "python3-torch / python3-torchvision not installed (scripts/deps.sh bench)")
lb, la = r.get("zoo_load_before"), r.get("zoo_load_after")
if lb and la:
    info("zoo: 1-minute load average before / after", f"{lb['loadavg']:.1f} / {la['loadavg']:.1f}")
# ---- 3x224x224 ----
threads, big_on = int(sys.argv[5]), sys.argv[6] != "0"
big_models, big_batches = sys.argv[7].split(), [int(b) for b in sys.argv[8].split(",")]
def big_why(needs_torch=True):
    if not big_on:
        return "BENCH_BIG=0 skips the 224x224 section"
    if needs_torch and not have_torch:
        return "python3-torch not installed (scripts/deps.sh bench)"
    return why()
def med(name, key):
    v = [d[key] for d in allv.get(name, []) if key in d]
    return median(v) if v else None
tgt_ips = 1.5 if threads >= 2 else 1.0
print(f"  -- 3x224x224, {threads} threads, flare vs PyTorch frozen (jit.freeze of the scripted eval model) --")
for m in big_models:
    for b in (1, 8, 32):
        what = f"{m} b{b} 224x224: flare/PyTorch-frozen images/s"
        f, t = med(f"big_{m}_b{b}", "images_per_s"), med(f"torch_big_{m}_b{b}_frozen", "images_per_s")
        if f and t:
            row(what, f"{f / t:.2f}x ({f:.1f}/{t:.1f})", f">= {tgt_ips}x", f / t >= tgt_ips)
        elif b not in big_batches:
            missing(what, f">= {tgt_ips}x", "BENCH_QUICK=1 runs batch " + ",".join(map(str, big_batches)))
        else:
            missing(what, f">= {tgt_ips}x", big_why(f is not None))
        fe = med(f"torch_big_{m}_b{b}_eager", "images_per_s")
        if f and fe:
            info(f"{m} b{b} 224x224: flare/PyTorch-eager images/s", f"{f / fe:.2f}x ({f:.1f}/{fe:.1f})")
        ff, tf = med(f"big_{m}_b{b}", "first_s"), med(f"torch_big_{m}_b{b}_frozen", "first_s")
        if ff and tf:
            info(f"{m} b{b}: time to first output, flare / frozen torch", f"{ff:.2f}/{tf:.2f} s")
    what = f"{m} 224x224: fl_onnx_load / onnx.load time"
    f, t = med(f"big_{m}_load", "load_s"), med(f"torch_big_{m}_load", "onnx_load_s")
    if f and t:
        row(what, f"{f / t:.2f}x ({f:.2f}/{t:.2f}s)", "<= 2x", f <= 2 * t)
    else:
        missing(what, "<= 2x", big_why(f is not None))
    for b in big_batches:
        f, t = r.get(f"rss_flare_{m}_b{b}"), r.get(f"rss_torch_{m}_b{b}")
        what = f"{m} b{b} 224x224: peak RSS flare / PyTorch frozen"
        if f and t:
            val = f"{f['kb'] / 1024:.0f}/{t['kb'] / 1024:.0f} MB"
            if b == 32:
                row(what, val, "<= torch", f["kb"] <= t["kb"])
            else:
                info(what, val)
        elif b == 32:
            missing(what, "<= torch", big_why(f is not None))
    if 32 not in big_batches:
        missing(f"{m} b32 224x224: peak RSS flare / PyTorch frozen", "<= torch",
                "BENCH_QUICK=1 runs batch " + ",".join(map(str, big_batches)))
c = r.get("cover_big")
what = "ResNet-50 224 b8: all structural criteria, 3 layers / forward"
if c:
    row(what, f"{c['ratio'] * 100:.2f}%", "<= 25%", c["ratio"] <= 0.25)
else:
    missing(what, "<= 25%", big_why(False) if "resnet50" in big_models else "resnet50 not in BENCH_BIG_MODELS")
for k in ("lsa", "dsa"):
    c = r.get(f"sa_big_{k}")
    what = f"ResNet-50 224 b8: {k.upper()} (512 wide, 10 000 traces) / forward"
    if c:
        info(what, f"{c['ratio'] * 100:.2f}% (build {c['build_s']:.1f} s once)")
    else:
        missing(what, "-", big_why(False) if "resnet50" in big_models else "resnet50 not in BENCH_BIG_MODELS")
gf = [v for k, v in r.items() if k.startswith("grad_resnet18_b") and v.get("side") == 224]
what = "ResNet-18 224 gradient step: flare/torch-autograd images/s"
if gf:
    t = r.get("torch_" + gf[0]["name"])
    if t:
        ratio = gf[0]["images_per_s"] / t["images_per_s"]
        row(what + f" b{gf[0]['batch']}", f"{ratio:.2f}x ({gf[0]['images_per_s']:.1f}/{t['images_per_s']:.1f})",
            ">= 1.5x", ratio >= 1.5)
    else:
        missing(what, ">= 1.5x", big_why())
else:
    missing(what, ">= 1.5x", big_why(False) if "resnet18" in big_models else "resnet18 not in BENCH_BIG_MODELS")
lb, la, bs = r.get("big_load_before"), r.get("big_load_after"), r.get("big_section")
if lb and la:
    info("224x224: 1-minute load average before / after", f"{lb['loadavg']:.1f} / {la['loadavg']:.1f}")
if bs:
    info("224x224 section: wall time" + (" (BENCH_QUICK=1)" if bs["quick"] else ""), f"{bs['seconds']} s")
for k, what in (("resnet18_conv1_vs_sgemm", "ResNet-18 conv1 7x7/2 (most FLOPs) / bare sgemm"),
                ("resnet18_layer4_vs_sgemm", "ResNet-18 layer4 3x3 512 (largest W) / bare sgemm")):
    c = r.get(k)
    if c:
        row(what, f"{c['ratio']*100:.0f}%", ">= 70%", c["ratio"] >= 0.7)
    else:
        missing(what, ">= 70%", why())
c = r.get("conv_vs_sgemm")
what = "conv 64->64 3x3 [16,64,32,32] / bare sgemm"
if c:
    row(what, f"{c['ratio']*100:.0f}%", ">= 50%", c["ratio"] >= 0.5)
else:
    missing(what, ">= 50%", why())
m = r.get("lenet5_train_peak_rss")
what = "peak RSS, nn train lenet5"
if m:
    row(what, f"{m['kb']/1024:.0f} MB", "<= 200MB", m["kb"] <= 200 * 1024)
else:
    missing(what, "<= 200MB", why())
cv = r.get("cover_lenet5_b256")
what = "coverage update (all structural criteria) / forward, b256"
if cv:
    row(what, f"{cv['ratio']*100:.0f}%", "<= 25%", cv["ratio"] <= 0.25)
else:
    missing(what, "<= 25%", why())
# agents: flare's case against the machine's floor, both measured in this run (the floor's
# mean of its runs before and after bench_agents_target)
def floor(name, key):
    v = [d[key] for d in floors.get(name, [])]
    return sum(v) / len(v) if v else None
p, fp = r.get("agents_persistent"), floor("floor_pipe_roundtrip", "us_per_trip")
what = "agents: flare case / bare 30-byte pipe round trip"
if p and fp:
    ratio = p["us_per_case"] / fp
    row(what, f"{ratio:.2f}x ({p['us_per_case']:.0f}/{fp:.0f}us)", "<= 1.3x", ratio <= 1.3)
else:
    missing(what, "<= 1.3x", why())
q, ff = r.get("agents_fresh"), floor("floor_fork_exec_wait", "us_per_run")
what = "agents: --fresh case / bare fork + exec + wait"
if q and ff:
    ratio = q["us_per_case"] / ff
    row(what, f"{ratio:.2f}x ({q['us_per_case']/1000:.1f}/{ff/1000:.1f}ms)", "<= 1.3x", ratio <= 1.3)
else:
    missing(what, "<= 1.3x", why())
g = r.get("agents_guidance")
e = r.get("agents_guidance_explore", {})
what = "agents: execs to all defects+edges, --schedule none / explore"
if g:
    row(what, f"{g['ratio']:.1f}x", "> 1x", g["ratio"] > 1 and e.get("reached") == e.get("seeds"))
    row("agents: --schedule explore median execs (seeds reaching goal)",
        f"{g['explore_median_execs']:.0f} ({e.get('reached')}/{e.get('seeds')})", "all",
        e.get("reached") == e.get("seeds"))
else:
    missing(what, "> 1x", why())
    missing("agents: --schedule explore median execs (seeds reaching goal)", "all", why())
for sysname in ("helpdesk", "coder", "pipeline"):
    for sch in ("explore", "none"):
        d = r.get(f"agents_defects_{sysname}_{sch}")
        what = f"agents: {sysname} defects found, 3000 execs, --schedule {sch} (median of 5)"
        if d:
            row(what, f"{d['median_found']:.0f}/{d['planted']}", f">= {d['planted'] - 1}",
                d["median_found"] >= d["planted"] - 1)
        else:
            missing(what, ">= 7", why())
for sysname in ("scheduler", "scheduler_step2ms", "taskforce"):
    d = r.get(f"agents_hangs_{sysname}")
    what = f"agents: {sysname} time lost to timeouts, 3000 execs (median of 5), hang found"
    if d:
        row(what, f"{d['median_hang_share']*100:.0f}% ({d['hang_found']}/{d['seeds']})",
            "<= 15%, all", d["median_hang_share"] <= 0.15 and d["hang_found"] == d["seeds"])
    else:
        missing(what, "<= 15%, all", why())
s0, s1 = (r.get(f"agents_hangs_scheduler_start300ms_spare{k}") for k in (0, 1))
what = "agents: 300 ms start-up, 1000 execs x 3 seeds, wall time with a spare process / without"
if s0 and s1:
    row(what, f"{s1['seconds'] / s0['seconds']:.2f}x ({s1['seconds']:.1f} s / {s0['seconds']:.1f} s)",
        "< 1", s1["seconds"] < s0["seconds"])
else:
    missing(what, "< 1", why())
for sysname in ("helpdesk", "coder"):
    g, off, on = (r.get(f"agents_llm_{sysname}{x}") for x in ("", "_off", "_on"))
    what = f"agents: {sysname} execs to all edges, generator off / on (median of 5; seeds reaching)"
    if g and off and on:
        row(what, f"{g['ratio']:.2f}x ({off['median_execs']:.0f}/{on['median_execs']:.0f}; "
            f"{off['reached']}/{off['seeds']} vs {on['reached']}/{on['seeds']})", "on: all seeds",
            on["reached"] == on["seeds"])
    else:
        missing(what, "on: all seeds", why())
for k in ("lsa", "dsa"):
    f, b = r.get("sa_" + k), r.get("sadl_" + k)
    what = f"{k.upper()} 10k vs 60k: sadl (extrapolated) / flare time"
    if f and b:
        ratio = b["seconds"] / f["seconds"]
        row(what, f"{ratio:.0f}x", ">= 50x", ratio >= 50)
    else:
        missing(what, ">= 50x", why("scipy" if f else None))
m = r.get("sa_peak_rss")
what = "peak RSS, bench_sa run (LSA + DSA + DSA-nlc)"
if m:
    row(what, f"{m['kb']/1024:.0f} MB", "< 1GB", m["kb"] < 1024 * 1024)
else:
    missing(what, "< 1GB", why())
a = r.get("lenet5_10ep")
what = "LeNet-5 Fashion-MNIST test accuracy, 10 epochs"
if a:
    acc = a.get("test_acc", -1)
    row(what, f"{acc*100:.2f}%", ">= 89%", acc >= 0.89)
else:
    missing(what, ">= 89%", why("quick"))
PY
