#!/bin/sh
# DeepSA's evaluation on Fashion-MNIST, reproduced with flare (docs/nn-fuzz-experiments.md).
#
#   scripts/deepsa_eval.sh [OUT] [EXECS] [ARCH]
#       (defaults: out/deepsa-eval, 5000 steps a campaign, lenet5; lenet4 works too)
#
# 1. The network (ARCH) trained by flare (5 epochs, -s 1); LeNet-1 as DeepXplore's second
#    model.
# 2. The LRP-important neurons of its last hidden layer (ratio 0.4, 10 000 training images).
# 3. Table 3: fuzzers dfuzz (deepsa, DSA), lfuzz (deepsa, LSA), dlfuzz, deepxplore, each from
#    the 100 seeds of every seed strategy (st-dper, st-lper, st-dall, st-lall, gini, best =
#    RobOT's BE-ST, random), 5 iterations per picked image, the same step budget: adversarial
#    examples (failing steps, and distinct findings), and LSCv / DSCv (surprise coverage on the
#    important neurons) of the test set before and after adding the distinct findings.
# 4. deepsa --sa-grad reference against exact, median of 5 campaign seeds.
# 5. Figures 2-5: accuracy of the top-N test inputs ranked by LSAv / DSAv (SA on the important
#    neurons), against plain LSA / DSA of the whole layer and a random order.
# 6. Retraining on each fuzzer's findings (st-dper seeds): clean accuracy, and accuracy on every
#    fuzzer's findings (a cross table).
# Results: OUT/table3.tsv, OUT/exact.tsv, OUT/topn.tsv, OUT/retrain.tsv, printed as Markdown at
# the end.
set -eu
cd "$(dirname "$0")/.."
out=${1:-out/deepsa-eval}
execs=${2:-5000}
arch=${3:-lenet5}
flare=${FLARE:-build/flare}
case $arch in # the last hidden layer
lenet5) layer=/relu4/Relu_output_0 ;;
lenet4) layer=/relu3/Relu_output_0 ;;
*) echo "deepsa_eval: ARCH is lenet5 or lenet4" >&2; exit 2 ;;
esac
mkdir -p "$out"
[ -x "$flare" ] || make --no-print-directory build/flare >/dev/null

[ -f "$out/m.onnx" ] || $flare nn train --arch "$arch" --epochs 5 -s 1 -o "$out/m.onnx" -q
[ -f "$out/m2.onnx" ] || $flare nn train --arch lenet1 --epochs 5 -s 2 -o "$out/m2.onnx" -q
[ -f "$out/imp.json" ] || $flare nn lrp -m "$out/m.onnx" -d fashion-mnist:train --limit 10000 \
    --layers "$layer" -o "$out/imp.json" -q >/dev/null
echo "$arch test accuracy: $($flare nn eval -m "$out/m.onnx" -d fashion-mnist:test --json -q | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["accuracy"])')" > "$out/accuracy.txt"

common="-m $out/m.onnx -i fashion-mnist:test -n 100 --important $out/imp.json --train fashion-mnist:train --iters 5 -E $execs -q"
fuzz() { # NAME SELECT SEED EXTRA...
    name=$1 sel=$2 seed=$3
    shift 3
    rm -rf "$out/runs/$name"
    mkdir -p "$out/runs"
    $flare nn fuzz $common --select "$sel" -s "$seed" -j 0 -o "$out/runs/$name" "$@" >/dev/null
}
for sel in st-dper st-lper st-dall st-lall gini best random; do
    fuzz "dfuzz-$sel" "$sel" 1 --strategy deepsa --kind dsa
    fuzz "lfuzz-$sel" "$sel" 1 --strategy deepsa --kind lsa
    fuzz "dlfuzz-$sel" "$sel" 1 --strategy dlfuzz
    fuzz "deepxplore-$sel" "$sel" 1 --strategy deepxplore --model2 "$out/m2.onnx"
done
for s in 1 2 3 4 5; do
    for g in reference exact; do
        fuzz "dfuzz-$g-$s" st-dper "$s" --strategy deepsa --kind dsa --sa-grad "$g"
        fuzz "lfuzz-$g-$s" st-dper "$s" --strategy deepsa --kind lsa --sa-grad "$g"
    done
done

# the distinct findings of each run as NPY (first examples), for coverage and evaluation
/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, sys
import numpy as np
out = sys.argv[1]
for run in sorted(glob.glob(f"{out}/runs/*")):
    xs, ys = [], []
    for j in sorted(glob.glob(f"{run}/failures/*/*,first.json")):
        meta = json.load(open(j))
        xs.append(np.load(j[:-5] + ".npy")[0])
        ys.append(meta["label"])
    if xs:
        np.save(f"{run}/found_x.npy", np.stack(xs).astype(np.float32))
        np.save(f"{run}/found_y.npy", np.array(ys, np.int64))
PY

# LSCv / DSCv: surprise coverage of the SA on the important neurons (`nn sa --important`),
# 1 000 sadl buckets between the bounds of the test set's own SA values, kept for the
# test set plus the findings, so that before and after are counted on the same buckets.
sacov() { # KIND SPEC [LOWER UPPER] -> "coverage lower upper"
    b=""
    [ $# -eq 4 ] && b="--lower $3 --upper $4"
    $flare nn sa -k "$1" -m "$out/m.onnx" --layer "$layer" --train fashion-mnist:train \
        --test "$2" --important "$out/imp.json" --buckets 1000 $b --json -q |
        /usr/bin/python3 -c 'import json,sys; c=json.load(sys.stdin)["coverage"]; print("%.2f %r %r" % (100*c["coverage"], c["lower"], c["upper"]))'
}
test_np="$out/test"
/usr/bin/python3 - "$out" <<'PY'
import gzip, sys
import numpy as np
out = sys.argv[1]
d = "/usr/share/datasets/fashion-mnist"
def idx(p):
    b = gzip.open(p).read() if p.endswith(".gz") else open(p, "rb").read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)
import os
f = lambda k: next(p for p in (f"{d}/t10k-{k}{z}" for z in (".gz", "")) if os.path.exists(p))
np.save(f"{out}/test_x.npy", (idx(f("images-idx3-ubyte"))[:, None] / 255.0).astype(np.float32))
np.save(f"{out}/test_y.npy", idx(f("labels-idx1-ubyte")).astype(np.int64))
PY
set -- $(sacov lsa "npy:$out/test_x.npy,$out/test_y.npy")
lscv=$1 llo=$2 lhi=$3
set -- $(sacov dsa "npy:$out/test_x.npy,$out/test_y.npy")
dscv=$1 dlo=$2 dhi=$3
printf 'fuzzer\tseeds\tadversarial\tdistinct\tLSCv\tDSCv\tLSCv_after\tDSCv_after\n' > "$out/table3.tsv"
for sel in st-dper st-lper st-dall st-lall gini best random; do
    for fz in dfuzz lfuzz dlfuzz deepxplore; do
        run="$out/runs/$fz-$sel"
        adv=$(/usr/bin/python3 -c "import json; s=json.load(open('$run/summary.json')); print(s['failures_total'], s['failures'])")
        after="$lscv $dscv"
        if [ -f "$run/found_x.npy" ]; then
            /usr/bin/python3 -c "
import numpy as np
x = np.concatenate([np.load('$out/test_x.npy'), np.load('$run/found_x.npy')])
y = np.concatenate([np.load('$out/test_y.npy'), np.load('$run/found_y.npy')])
np.save('$run/plus_x.npy', x); np.save('$run/plus_y.npy', y)"
            after="$(sacov lsa "npy:$run/plus_x.npy,$run/plus_y.npy" "$llo" "$lhi" | cut -d' ' -f1) $(sacov dsa "npy:$run/plus_x.npy,$run/plus_y.npy" "$dlo" "$dhi" | cut -d' ' -f1)"
        fi
        printf '%s\t%s\t%s\t%s\t%s\n' "$fz" "$sel" "$(echo $adv | tr ' ' '\t')" \
            "$(printf '%s\t%s' "$lscv" "$dscv")" "$(echo $after | tr ' ' '\t')" >> "$out/table3.tsv"
    done
done

printf 'fuzzer\tsa_grad\tseed\tadversarial\tdistinct\tcorpus\n' > "$out/exact.tsv"
for s in 1 2 3 4 5; do for g in reference exact; do for fz in dfuzz lfuzz; do
    /usr/bin/python3 -c "import json; s=json.load(open('$out/runs/$fz-$g-$s/summary.json')); print('$fz\t$g\t$s\t%d\t%d\t%d' % (s['failures_total'], s['failures'], s['corpus']))" >> "$out/exact.tsv"
done; done; done

for k in lsa dsa; do
    $flare nn sa -k $k -m "$out/m.onnx" --layer "$layer" --train fashion-mnist:train \
        --test fashion-mnist:test -o "$out/$k.npy" -q >/dev/null
    $flare nn sa -k $k -m "$out/m.onnx" --layer "$layer" --train fashion-mnist:train \
        --test fashion-mnist:test --important "$out/imp.json" -o "$out/${k}v.npy" -q >/dev/null
done
$flare nn run -m "$out/m.onnx" -i fashion-mnist:test -o "$out/logits.npy" -q >/dev/null
/usr/bin/python3 - "$out" <<'PY'
import sys
import numpy as np
out = sys.argv[1]
ok = np.load(f"{out}/logits.npy").argmax(1) == np.load(f"{out}/test_y.npy")
orders = {k: np.argsort(-np.nan_to_num(np.load(f"{out}/{k}.npy"), nan=-np.inf), kind="stable")
          for k in ("lsav", "lsa", "dsav", "dsa")}
orders["random"] = np.random.default_rng(1).permutation(len(ok))
with open(f"{out}/topn.tsv", "w") as f:
    f.write("N\t" + "\t".join(orders) + "\n")
    for n in (100, 200, 500, 1000, 2000, 5000, 10000):
        f.write(f"{n}\t" + "\t".join(f"{ok[o[:n]].mean():.3f}" for o in orders.values()) + "\n")
PY

printf 'retrained_on\tclean_before\tclean_after' > "$out/retrain.tsv"
for fz in dfuzz lfuzz dlfuzz deepxplore; do printf '\ton_%s' "$fz" >> "$out/retrain.tsv"; done
echo >> "$out/retrain.tsv"
acc() { # MODEL SPEC
    $flare nn eval -m "$1" -d "$2" --json -q 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["accuracy"])'
}
for fz in none dfuzz lfuzz dlfuzz deepxplore; do
    if [ "$fz" = none ]; then
        model="$out/m.onnx"
        line="none\t-\t$(acc "$model" fashion-mnist:test)"
    else
        model="$out/m-$fz.onnx"
        $flare nn retrain -m "$out/m.onnx" -d fashion-mnist:train --extra "$out/runs/$fz-st-dper" \
            -o "$model" -q > "$out/retrain-$fz.txt"
        line="$fz\t$(awk '/^clean test acc/ {print $4 "\t" $5}' "$out/retrain-$fz.txt")"
    fi
    for other in dfuzz lfuzz dlfuzz deepxplore; do
        f="$out/runs/$other-st-dper/found_x.npy"
        if [ -f "$f" ]; then
            line="$line\t$(acc "$model" "npy:$f,$out/runs/$other-st-dper/found_y.npy")"
        else
            line="$line\t-"
        fi
    done
    printf '%b\n' "$line" >> "$out/retrain.tsv"
done

/usr/bin/python3 - "$out" <<'PY'
import csv, statistics, sys
out = sys.argv[1]
def md(path):
    rows = list(csv.reader(open(path), delimiter="\t"))
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for r in rows[1:]:
        print("| " + " | ".join(r) + " |")
    print()
print(open(f"{out}/accuracy.txt").read())
md(f"{out}/table3.tsv")
rows = list(csv.DictReader(open(f"{out}/exact.tsv"), delimiter="\t"))
print("| fuzzer | sa_grad | adversarial (median, min-max) | distinct (median, min-max) |")
print("|---|---|---|---|")
for fz in ("dfuzz", "lfuzz"):
    for g in ("reference", "exact"):
        a = [int(r["adversarial"]) for r in rows if r["fuzzer"] == fz and r["sa_grad"] == g]
        d = [int(r["distinct"]) for r in rows if r["fuzzer"] == fz and r["sa_grad"] == g]
        print(f"| {fz} | {g} | {statistics.median(a):.0f} ({min(a)}-{max(a)}) | {statistics.median(d):.0f} ({min(d)}-{max(d)}) |")
print()
md(f"{out}/topn.tsv")
md(f"{out}/retrain.tsv")
PY
