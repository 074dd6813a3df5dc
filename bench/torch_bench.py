#!/usr/bin/python3
"""Baseline for flare's benchmarks: the same architectures in PyTorch (CPU).

Prints one JSON object per line: {"name": ..., "images_per_s": ...}. Run with Debian's
python3-torch (/usr/bin/python3). Threads are fixed with torch.set_num_threads so that both
sides use the same number of cores.

    torch_bench.py [THREADS]                    LeNet-5 training and inference
    torch_bench.py export DIR MODEL...          torchvision MODELs (random weights, seed 0,
                                                eval mode) to DIR/MODEL.onnx for bench_nn zoo
    torch_bench.py zoo THREADS REPS MODEL...    the same models' inference images/s, batch 32
                                                of 3x64x64, median of REPS runs
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


def zoo_export(outdir, names):
    os.makedirs(outdir, exist_ok=True)
    x = torch.randn(ZOO_BATCH, 3, ZOO_SIDE, ZOO_SIDE)
    for name in names:
        path = os.path.join(outdir, name + ".onnx")
        tmp = path + ".tmp"
        # torch's default eval-mode export folds each BatchNormalization into the convolution
        # before it, as inference engines do; PyTorch's eager model below keeps them
        torch.onnx.export(zoo_model(name), x, tmp, opset_version=13, input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "N"}})
        os.replace(tmp, path)


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
