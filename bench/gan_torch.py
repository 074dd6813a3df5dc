#!/usr/bin/python3
"""PyTorch baseline of flare's FuzzGAN training step (`flare gan train`), for make bench.

usage: /usr/bin/python3 bench/gan_torch.py LENET1.onnx [--threads T] [--batches N] [--batch 128]

The same networks, losses and batch as src/gan/ (include/flare/gan.h), written in torch:
  G(z, c, l): cat(z[64], onehot c, onehot l over the P neurons of LeNet-1's layer set "all")
              -> Linear -> [64, 7, 7] -> BN ReLU -> ConvT(32, 4, 2, 1) -> BN ReLU
              -> ConvT(1, 4, 2, 1) -> Sigmoid
  D(x):       Conv(32, 4, 2, 1) LReLU(0.2) -> Conv(64, 4, 2, 1) LReLU -> adv Linear(1), cls Linear(K)
  D step:     BCE(adv(x), 1) + CE(cls(x), y) + BCE(adv(G), 0)
  G step:     BCE(adv(G), 1) + CE(cls(G), c) + 0.5 * -mean min(CE(model(G), c), ln K)
              + 1 * -mean a_l / max_k a_k  (a: channel mean of |x|, the max held constant)
Adam lr 2e-4, betas (0.5, 0.999), Fashion-MNIST training images in [0, 1]. The model under test
is the LeNet-1 ONNX file's weights in a torch module (frozen, eval mode).
Times batches 11..N (the first ten warm up). Prints one JSON line: name, threads, batch,
batches, s_per_batch, s_per_epoch.
"""
import argparse
import json
import math
import sys
import time

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from fuzz_torch import named_set  # noqa: E402


class LeNet1(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 5)
        self.conv2 = nn.Conv2d(4, 12, 5)
        self.fc1 = nn.Linear(192, k)

    def forward(self, x):
        """The logits and the layer set "all": conv1, relu1, pool1, conv2, relu2, pool2, logits."""
        c1 = self.conv1(x)
        r1 = F.relu(c1)
        p1 = F.max_pool2d(r1, 2)
        c2 = self.conv2(p1)
        r2 = F.relu(c2)
        p2 = F.max_pool2d(r2, 2)
        z = self.fc1(p2.flatten(1))
        return z, [c1, r1, p1, c2, r2, p2, z]


def load_lenet1(path):
    w = {i.name: torch.from_numpy(np.array(numpy_helper.to_array(i), np.float32))
         for i in onnx.load(path).graph.initializer}
    k = w["fc1.weight"].shape[0]
    m = LeNet1(k)
    m.load_state_dict({n: w[n] for n in m.state_dict()})
    for p in m.parameters():
        p.requires_grad_(False)
    return m.eval(), k


class Gen(nn.Module):
    def __init__(self, d_in):
        super().__init__()
        self.fc = nn.Linear(d_in, 64 * 7 * 7)
        self.bn0 = nn.BatchNorm2d(64)
        self.up1 = nn.ConvTranspose2d(64, 32, 4, 2, 1)
        self.bn1 = nn.BatchNorm2d(32)
        self.up2 = nn.ConvTranspose2d(32, 1, 4, 2, 1)

    def forward(self, z, c, l):
        h = self.fc(torch.cat([z, c, l], 1)).view(-1, 64, 7, 7)
        h = F.relu(self.bn1(self.up1(F.relu(self.bn0(h)))))
        return torch.sigmoid(self.up2(h))


class Disc(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 4, 2, 1)
        self.conv2 = nn.Conv2d(32, 64, 4, 2, 1)
        self.adv = nn.Linear(64 * 7 * 7, 1)
        self.cls = nn.Linear(64 * 7 * 7, k)

    def forward(self, x):
        h = F.leaky_relu(self.conv2(F.leaky_relu(self.conv1(x), 0.2)), 0.2).flatten(1)
        return self.adv(h)[:, 0], self.cls(h)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=60)
    ap.add_argument("--batch", type=int, default=128)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    mut, K = load_lenet1(a.model)
    widths = [4, 4, 4, 12, 12, 12, K]
    offsets = np.cumsum([0] + widths[:-1])
    P = sum(widths)
    x8, y = named_set("fashion-mnist:train")
    X = torch.from_numpy(x8.astype(np.float32) / 255.0)
    Y = torch.from_numpy(y)
    G, D = Gen(64 + K + P), Disc(K)
    og = torch.optim.Adam(G.parameters(), 2e-4, betas=(0.5, 0.999))
    od = torch.optim.Adam(D.parameters(), 2e-4, betas=(0.5, 0.999))
    B, cap = a.batch, math.log(K)
    perm = torch.randperm(X.shape[0])
    t10 = None
    for b in range(a.batches):
        if b == 10:
            t10 = time.perf_counter()
        idx = perm[b * B:(b + 1) * B]
        real, yr = X[idx], Y[idx]
        z = torch.randn(B, 64)
        c = torch.randint(0, K, (B,))
        layer = torch.randint(0, len(widths), (B,))
        j = torch.tensor([int(torch.randint(0, widths[l], ()).item()) for l in layer])
        flat = torch.tensor(offsets)[layer] + j
        fake = G(z, F.one_hot(c, K).float(), F.one_hot(flat, P).float())
        # D step
        od.zero_grad()
        adv_r, cls_r = D(real)
        adv_f, _ = D(fake.detach())
        ld = (F.binary_cross_entropy_with_logits(adv_r, torch.ones(B)) + F.cross_entropy(cls_r, yr)
              + F.binary_cross_entropy_with_logits(adv_f, torch.zeros(B)))
        ld.backward()
        od.step()
        # G step
        og.zero_grad()
        adv, cls = D(fake)
        logits, acts = mut(fake)
        ce = F.cross_entropy(logits, c, reduction="none")
        l_err = -torch.minimum(ce, torch.full_like(ce, cap)).mean()
        l_neu = 0
        for li in range(len(widths)):
            rows = (layer == li).nonzero()[:, 0]
            if len(rows) == 0:
                continue
            t = acts[li][rows]
            am = t.abs().flatten(2).mean(2) if t.dim() == 4 else t.abs()
            l_neu = l_neu - (am[torch.arange(len(rows)), j[rows]] / am.max(1).values.detach()).sum()
        lg = (F.binary_cross_entropy_with_logits(adv, torch.ones(B)) + F.cross_entropy(cls, c)
              + 0.5 * l_err + 1.0 * l_neu / B)
        lg.backward()
        og.step()
    per = (time.perf_counter() - t10) / (a.batches - 10)
    print(json.dumps({"name": "gan_train_torch", "threads": a.threads, "batch": B,
                      "batches": a.batches - 10, "s_per_batch": round(per, 5),
                      "s_per_epoch": round(per * (X.shape[0] // B), 1)}))


if __name__ == "__main__":
    main()
