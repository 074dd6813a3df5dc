#!/usr/bin/python3
"""PyTorch autograd baseline of flare's gradient-guided round (`flare nn fuzz --strategy pgd|dlfuzz`), for make bench.

usage: /usr/bin/python3 bench/grad_torch.py MODEL.onnx SEEDS.npy SEEDS.idx.npy
           --strategy pgd|dlfuzz [--threads T] [--execs N] [--k 64] [--seed S]

The same loop as src/fuzz/grad.c, written with torch autograd: k lanes, each a seed being
stepped; per round ONE batched forward pass (with hooks on every layer of `all`) that
evaluates every lane's last step (prediction against the seed's label, the step's own gain of
nc:0.75 over the deepxplore-scaled neuron values, dlfuzz's acceptance: gain / total >
0.01 / (i + 1) and L2 ratio < 0.02) and whose graph gives the next gradient through ONE
backward pass; then every lane steps and is rounded to 8-bit pixels.
  pgd     cross-entropy of the label; eps 0.3, step 0.01, 40 steps, random start, projected;
          a lane stops at its first failure
  dlfuzz  0.5 (z[top2..5]) - z[orig] + 0.5 * sum of 10 random uncovered neurons' channel
          means (DLFuzz's table, threshold 0.5 on scaled values); 5 steps of 0.02 g / rms(g)
Prints one JSON line: name, strategy, execs, seconds, steps_per_s, failures_total, threads, k.
"""
import argparse
import json
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from fuzz_torch import LAYERS, WIDTHS, Cover, Probe, load_model, named_set  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("seeds")
    ap.add_argument("labels")
    ap.add_argument("--strategy", choices=["pgd", "dlfuzz"], required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--execs", type=int, default=20000)
    ap.add_argument("--k", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    model = load_model(a.model)
    for p in model.parameters():
        p.requires_grad_(False)
    probe = Probe(model, [m for m, _ in LAYERS])
    x0 = np.load(a.seeds).astype(np.float32)
    idx = np.load(a.labels)
    labels = named_set("fashion-mnist:test")[1][idx]
    with torch.no_grad():
        pred = model(torch.from_numpy(x0)).argmax(1).numpy()
    keep = pred == labels  # correctly classified seeds only, as the campaign
    x0, labels = np.round(x0[keep] * 255) / 255, labels[keep]
    S = len(x0)
    offs = np.cumsum([0] + WIDTHS)
    cover = Cover("nc:0.75", cols=np.arange(offs[-1]), layer_slices=list(zip(offs[:-1], offs[1:])))
    times = np.zeros(offs[-1], np.int64)  # DLFuzz's table
    pgd = a.strategy == "pgd"
    eps, step, iters = (0.3, 0.01, 40) if pgd else (0.0, 0.02, 5)
    K = a.k
    lane_seed = np.full(K, -1)
    lane_it = np.zeros(K, int)
    lane_orig = np.zeros(K, int)
    lane_top = np.zeros((K, 4), int)
    lane_neur = np.zeros((K, 10), int)
    x = np.zeros((K, 1, 28, 28), np.float32)
    nxt, execs, fails, queue = 0, 0, 0, 0
    t0 = time.time()
    while execs < a.execs:
        for i in range(K):  # refill: fifo, then uniform
            if lane_seed[i] < 0:
                s = nxt if nxt < S else int(rng.integers(S))
                nxt += 1
                lane_seed[i], lane_it[i] = s, 0
                x[i] = x0[s]
                if pgd:
                    x[i] = np.clip(x[i] + eps * rng.uniform(-1, 1, x[i].shape), 0, 1)
                x[i] = np.round(x[i] * 255) / 255
        xt = torch.from_numpy(x).requires_grad_(True)
        logits, vals, rngs = probe.run(model, xt, need_range=True)
        with torch.no_grad():
            pr = logits.argmax(1).numpy()
            # per-row gain of nc:0.75, rows in order (what grad.c's gains() does)
            gain = np.zeros(K, int)
            for i in range(K):
                if lane_it[i] == 0:
                    continue
                before = cover.count()
                cover.update(vals[i:i + 1], [(mn[i:i + 1], mx[i:i + 1]) for mn, mx in rngs])
                gain[i] = cover.count() - before
            if not pgd:  # the table counts every image run
                sc = []
                for (lo, hi), (mn, mx) in zip(zip(offs[:-1], offs[1:]), rngs):
                    v = vals[:, lo:hi].double()
                    sc.append(((v - mn.double()[:, None]) / (mx - mn).double()[:, None]).nan_to_num(0))
                times += (torch.cat(sc, 1) > 0.5).sum(0).numpy()
        active = np.ones(K, bool)
        for i in range(K):
            s = lane_seed[i]
            if lane_it[i] == 0:
                lane_orig[i] = pr[i]
                order = np.argsort(-logits[i].detach().numpy(), kind="stable")
                lane_top[i] = [c for c in order if c != pr[i]][:4]
                unc = np.nonzero(times == 0)[0]
                lane_neur[i] = rng.choice(unc if len(unc) >= 10 else np.arange(len(times)), 10,
                                          replace=False)
                continue
            execs += 1
            failed = pr[i] != labels[s]
            fails += failed
            if not pgd and not failed:
                l2 = np.linalg.norm(x[i] - x0[s]) / np.linalg.norm(x0[s])
                queue += gain[i] / cover.total > 0.01 / (s + 1) and l2 < 0.02
            if lane_it[i] >= iters or (pgd and failed):
                active[i] = False
                lane_seed[i] = -1
        if not active.any():
            continue
        act = torch.from_numpy(active)
        if pgd:
            obj = F.cross_entropy(logits, torch.from_numpy(labels[np.maximum(lane_seed, 0)]),
                                  reduction="none")
        else:
            z = logits
            r = torch.arange(K)
            obj = 0.5 * z[r[:, None], torch.from_numpy(lane_top)].sum(1) - z[r, torch.from_numpy(lane_orig)]
            outs = probe.outs
            for j in range(10):  # the neuron terms: channel means of the chosen neurons
                n = torch.from_numpy(lane_neur[:, j])
                layer = np.searchsorted(offs, lane_neur[:, j], side="right") - 1
                for L in np.unique(layer):
                    rows = torch.from_numpy(np.nonzero(layer == L)[0])
                    o = outs[L]
                    v = o[rows, n[rows] - int(offs[L])]
                    obj = obj.index_add(0, rows, 0.5 * (v.mean((1, 2)) if v.dim() == 3 else v))
        g, = torch.autograd.grad((obj * act).sum(), xt)
        g = g.numpy()
        for i in np.nonzero(active)[0]:
            s = lane_seed[i]
            if pgd:
                x[i] = np.clip(np.clip(x[i] + step * np.sign(g[i]), x0[s] - eps, x0[s] + eps), 0, 1)
            else:
                x[i] = np.clip(x[i] + step * g[i] / (np.sqrt((g[i] ** 2).mean()) + 1e-5), 0, 1)
            x[i] = np.round(x[i] * 255) / 255
            lane_it[i] += 1
    dt = time.time() - t0
    print(json.dumps({"name": f"grad_{a.strategy}", "strategy": a.strategy, "execs": execs,
                      "seconds": round(dt, 3), "steps_per_s": round(execs / dt, 1),
                      "failures_total": int(fails), "queued": int(queue), "threads": a.threads,
                      "k": K}))


if __name__ == "__main__":
    main()
