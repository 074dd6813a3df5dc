#!/usr/bin/python3
"""Baseline for flare's benchmarks: the same architectures in PyTorch (CPU).

Prints one JSON object per line: {"name": ..., "images_per_s": ...}. Run with Debian's
python3-torch (/usr/bin/python3). Threads are fixed with torch.set_num_threads so that both
sides use the same number of cores.

    torch_bench.py [THREADS]                    LeNet-5 training and inference
    torch_bench.py export DIR [--side=S] [--opset=O] [--npy=B,...] MODEL...
                                                torchvision MODELs (random weights, seed 0,
                                                eval mode) to DIR/MODEL.onnx for bench_nn zoo /
                                                big: side S (64), opset O (13), free batch dim;
                                                --npy: also DIR/xB.npy, a batch of B inputs of
                                                3xSxS (seed 1) for `flare nn run`
    torch_bench.py zoo THREADS REPS MODEL...    the same models' inference images/s, batch 32
                                                of 3x64x64, median of REPS runs
    torch_bench.py big DIR SIDE THREADS REPS BATCHES MODEL...
                                                per model: onnx.load of DIR/MODEL.onnx (median
                                                of 5), then per batch of BATCHES (1,8,32) the
                                                frozen model's (torch.jit.freeze of the scripted
                                                eval model: BatchNorm folded, as in the export)
                                                time to first output and steady images/s
                                                (median of REPS timed runs after 3 passes: the
                                                JIT's profiling executor optimises the graph
                                                on the second); BENCH_EAGER=1: the eager model
                                                too (labelled "eager")
    torch_bench.py rss SIDE THREADS BATCH MODEL one process, one configuration: the frozen
                                                model, 2 passes of a batch; prints its peak RSS
                                                (ru_maxrss: the whole process, torch included)
    torch_bench.py grad SIDE THREADS REPS BATCH MODEL
                                                gradient step: eager forward + backward to the
                                                input (x.requires_grad_(), sum(logits * seed)
                                                .backward(), parameters frozen), median of REPS
"""
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(256, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def bench_train(model, batch, steps, warmup=5):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    model.train()
    for i in range(warmup + steps):
        if i == warmup:
            t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return batch * steps / (time.perf_counter() - t0)


def bench_infer(model, batch, steps, warmup=3):
    x = torch.rand(batch, 1, 28, 28)
    model.eval()
    with torch.no_grad():
        for i in range(warmup + steps):
            if i == warmup:
                t0 = time.perf_counter()
            model(x)
    return batch * steps / (time.perf_counter() - t0)


ZOO_BATCH, ZOO_SIDE, ZOO_STEPS = 32, 64, 3


def zoo_model(name):
    """The torchvision architecture with random weights (never downloaded), the same weights
    in every process: the exported model and the timed one are the same network."""
    import torchvision.models as tvm
    torch.manual_seed(0)
    return getattr(tvm, name)().eval()


def zoo_export(outdir, args):
    """export DIR [--side=S] [--opset=O] [--npy=B,...] MODEL...: the side and opset of the
    64x64 rows (64, 13) unless given."""
    side, opset, npy, names = ZOO_SIDE, 13, [], []
    for a in args:
        if a.startswith("--side="):
            side = int(a[7:])
        elif a.startswith("--opset="):
            opset = int(a[8:])
        elif a.startswith("--npy="):
            npy = [int(b) for b in a[6:].split(",")]
        else:
            names.append(a)
    os.makedirs(outdir, exist_ok=True)
    x = torch.randn(2, 3, side, side)
    for name in names:
        path = os.path.join(outdir, name + ".onnx")
        tmp = path + ".tmp"
        # torch's default eval-mode export folds each BatchNormalization into the convolution
        # before it, as inference engines do; the frozen model (big) folds them too, the eager
        # model (zoo) keeps them
        torch.onnx.export(zoo_model(name), x, tmp, opset_version=opset, input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
        os.replace(tmp, path)
    if npy:
        import numpy as np
        g = torch.Generator().manual_seed(1)
        for b in npy:
            np.save(os.path.join(outdir, "x%d.npy" % b),
                    torch.randn(b, 3, side, side, generator=g).numpy())


def frozen_model(name):
    """The model as PyTorch serves it at its fastest without another library: scripted, eval,
    frozen (torch.jit.freeze folds each BatchNorm into its convolution, inlines the weights)."""
    with torch.no_grad():
        return torch.jit.freeze(torch.jit.script(zoo_model(name)))


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def timed_ips(f, x, reps, warmup=3):
    """(first_s, images/s): the first call's time, then `warmup - 1` more untimed calls, then
    the median of `reps` timed runs of `steps` calls (steps: about 0.25 s per run)."""
    t0 = time.perf_counter()
    f(x)
    first = time.perf_counter() - t0
    t = first
    for _ in range(warmup - 1):
        t0 = time.perf_counter()
        f(x)
        t = time.perf_counter() - t0
    steps = max(1, min(50, int(0.25 / max(t, 1e-6))))
    v = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(steps):
            f(x)
        v.append(x.shape[0] * steps / (time.perf_counter() - t0))
    return first, median(v)


def big_bench(outdir, side, threads, reps, batches, names):
    import onnx
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1)
    for name in names:
        path = os.path.join(outdir, name + ".onnx")
        lt = []
        for _ in range(5):
            t0 = time.perf_counter()
            onnx.load(path)
            lt.append(time.perf_counter() - t0)
        print(json.dumps({"name": "big_%s_load" % name, "side": side, "onnx_load_s": round(median(lt), 4),
                          "file_mb": round(os.path.getsize(path) / 2**20, 1)}), flush=True)
        t0 = time.perf_counter()
        fm = frozen_model(name)
        freeze_s = time.perf_counter() - t0
        kinds = [("frozen", fm)]
        if os.environ.get("BENCH_EAGER") == "1":
            kinds.append(("eager", zoo_model(name)))
        for b in batches:
            x = torch.randn(b, 3, side, side, generator=g)
            for kind, model in kinds:
                with torch.no_grad():
                    first, ips = timed_ips(model, x, reps)
                print(json.dumps({"name": "big_%s_b%d_%s" % (name, b, kind), "side": side, "batch": b,
                                  "threads": threads, "model": kind, "script_freeze_s": round(freeze_s, 3),
                                  "first_s": round(first, 4), "images_per_s": round(ips, 2)}), flush=True)


def rss_one(side, threads, batch, name):
    import gc
    import resource
    torch.set_num_threads(threads)
    fm = frozen_model(name)
    gc.collect()
    x = torch.randn(batch, 3, side, side, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for _ in range(2):
            fm(x)
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"name": "rss_%s_b%d" % (name, batch), "side": side, "batch": batch,
                      "threads": threads, "model": "frozen", "kb": kb}), flush=True)


def grad_bench(side, threads, reps, batch, name):
    torch.set_num_threads(threads)
    model = zoo_model(name)
    for p in model.parameters():
        p.requires_grad_(False)
    g = torch.Generator().manual_seed(1)
    x0 = torch.randn(batch, 3, side, side, generator=g)
    seed = torch.randn(batch, 1000, generator=g)

    def step(x0):
        x = x0.clone().requires_grad_()
        (model(x) * seed).sum().backward()
        return x.grad

    first, ips = timed_ips(step, x0, reps)
    print(json.dumps({"name": "grad_%s_b%d" % (name, batch), "side": side, "batch": batch,
                      "threads": threads, "model": "eager autograd", "first_s": round(first, 4),
                      "images_per_s": round(ips, 2)}), flush=True)


def zoo_bench(threads, reps, names):
    torch.set_num_threads(threads)
    x = torch.randn(ZOO_BATCH, 3, ZOO_SIDE, ZOO_SIDE)
    for name in names:
        model = zoo_model(name)
        v = []
        with torch.inference_mode():
            model(x)  # the first pass pays torch's one-off costs, as flare's plans its buffers
            for _ in range(reps):
                t0 = time.perf_counter()
                for _ in range(ZOO_STEPS):
                    model(x)
                v.append(ZOO_BATCH * ZOO_STEPS / (time.perf_counter() - t0))
        v.sort()
        print(json.dumps({"name": "zoo_%s_b32" % name, "threads": threads,
                          "images_per_s": round(v[len(v) // 2], 1)}), flush=True)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "export":
        return zoo_export(sys.argv[2], sys.argv[3:])
    if len(sys.argv) > 7 and sys.argv[1] == "big":
        a = sys.argv
        return big_bench(a[2], int(a[3]), int(a[4]), int(a[5]), [int(b) for b in a[6].split(",")], a[7:])
    if len(sys.argv) == 6 and sys.argv[1] == "rss":
        return rss_one(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    if len(sys.argv) == 7 and sys.argv[1] == "grad":
        a = sys.argv
        return grad_bench(int(a[2]), int(a[3]), int(a[4]), int(a[5]), a[6])
    if len(sys.argv) > 3 and sys.argv[1] == "zoo":
        return zoo_bench(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    m = LeNet5()
    # best of three runs, as bench_nn does: the least disturbed run on a shared machine
    print(json.dumps({"name": "lenet5_train_b64", "threads": threads,
                      "images_per_s": max(bench_train(m, 64, 200) for _ in range(3))}))
    print(json.dumps({"name": "lenet5_infer_b256", "threads": threads,
                      "images_per_s": max(bench_infer(m, 256, 40) for _ in range(3))}))


if __name__ == "__main__":
    main()
