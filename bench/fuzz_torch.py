#!/usr/bin/python3
"""PyTorch baseline of flare's DeepHunter loop (`flare nn fuzz --strategy deephunter`), for make bench.

usage: /usr/bin/python3 bench/fuzz_torch.py MODEL.onnx SEEDS.npy [LABELS.npy]
           [--criterion kmnc:100|nc:0.75] [--profile FILE | --train SPEC]
           [--threads T] [--execs N] [--k 64] [--seed S] [--pick kind|flat] [--power deephunter|k]

  MODEL.onnx   LeNet-5 as flare's zoo or torch.onnx.export writes it (initializers conv1.weight,
               conv1.bias, conv2.*, fc1.*, fc2.*, fc3.*; shapes are asserted)
  SEEDS.npy    float32 [n,1,28,28] in [0,1] (`flare nn select -o SEEDS.npy`)
  LABELS.npy   int labels [n]; a name ending in .idx.npy is read as indices into
               fashion-mnist:test (what `flare nn select` writes next to SEEDS); omitted:
               the model's predictions on the seeds are the labels
  --profile    kmnc's training profile: a flare profile (`flare nn profile`, layer set `all`
               or `conv+dense`) or an .npz with min, max over the 484 neurons of `all`;
               without it the profile is computed here from --train (default
               fashion-mnist:train, or a float32 NPY), through the same torch forward pass
Prints one JSON line: name, criterion, execs, seconds, mutants_per_s, corpus, covered, total,
coverage, failures (distinct (true, pred, root) findings), failures_total (failing mutants),
threads, k, seeds_used, seeds_dropped, forward_cover_s / forward_cover_share (batched forward
with hooks + coverage update), mutate_s (Mutate() calls), setup_s (load, profile, dry run).

What it mirrors (DeepHunter, Xie et al. ISSTA 2019, as NeuraL-Coverage's fuzz.py runs it):
  - queue of seeds, prob selection over batches (a seed, or the mutants one round kept):
    priority 1 - B_c/gamma, p_min once B_c >= (1-p_min)*gamma, gamma 5, p_min 0.01; B_c counts
    how often the batch was picked; the batches walked in queue order, each taken with its
    priority (DeepHunter's prob_next, as flare); then one of the batch's entries uniformly;
  - per pick ceil(K * left / budget) mutants, 1..K (DeepHunter's power schedule, as flare's:
    budget = beta*255*size, left = budget - sum |I - I0|; `--power k`: always K, as NLC's
    schedule with one seed per iteration gives), each from Mutate(I): up to TRY_NUM 50 tries
    of a transformation: a kind drawn uniformly among those allowed, then one of its
    parameters (DeepHunter's mutate_one, flare's deephunter menu; `--pick flat`: uniformly
    from the flat menu of (transformation, parameter) pairs, as NLC's randomPick), affine ones
    (translate, scale, shear, rotate) only while the lineage has none; after an affine one the lineage's reference I0 becomes t(I0);
    validity: L0(x - I0) < alpha*size (alpha 0.02, size = all 784 values) or
    Linf(x - I0) <= beta*255 (beta 0.2); DeepHunter's released parameter ranges
    (translate -3..2 px, scale 0.7..1.1, shear -0.6..0.5, rotate -50..49 deg, contrast
    0.5..1.2, brightness -20..19, blur kernels 1..9, pixel change 1..9 pixels, noise 1..3);
  - coverage kmnc:K (DeepGauge sections, DeepHunter's index formula, constant neurons left
    out of the total) or nc:T (DeepXplore scaling: layer tensor min-max, then channel mean,
    strictly above T), over every layer output but the input and Flatten (11 layers, 484
    neurons: flare's `--layers all`), or the profile's layers;
  - a mutant is kept (joins the queue, B_c 0) when it covers an item that neither the state
    before the batch nor the earlier mutants of the batch covered (flare's sequential flags),
    unless the model misclassifies it: then it is a failure and is not queued.
Where it differs:
  - from NeuraL-Coverage's fuzz.py: NLC runs the model and the coverage on one mutant at a
    time; here the K mutants of one pick are ONE batched forward pass (no_grad, eval mode,
    forward hooks on every layer), as flare does, so that make bench compares loop with loop
    on equal terms. NLC's own menu differs (no shear / noise, alpha 0.4, beta 0.8, L0 against
    the non-zero values of I0): that is flare's `nlc` preset, not this script's.
    Failing mutants still update the coverage here (flare updates it with the whole batch);
    mutants that Mutate() could not make in 50 tries are dropped, not run (NLC runs I again).
  - from DeepHunter's released code: it counts contrast, brightness and blur as "affine"
    (class B); we follow the paper and flare (affine = the 4 geometric ones). Salt is 255
    (DeepHunter writes 1 into 0..255 images). Blur id 10 (bilateral) is not in the menu
    (DeepHunter's range is 1..9), so it is not implemented.
  - from flare's loop: transformations are torch ops (affine_grid/grid_sample bilinear with
    zero fill about the image centre; conv2d box / Gaussian with OpenCV's fixed kernels and
    reflect-101 border; unfold+median with replicate border), rounded and clipped to 0..255:
    the same definitions, not the same bits; the random streams differ (numpy PCG64 here), so
    corpus, coverage and failures are comparable in distribution, not equal. Nothing is
    written to disk (flare writes queue/, failures/, plot_data): the baseline is the loop only.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

# (module, flare's layer name); all 11 layers of `--layers all` (Flatten is a re-shaper)
LAYERS = [("conv1", "/conv1/Conv_output_0"), ("relu1", "/relu1/Relu_output_0"),
          ("pool1", "/pool1/MaxPool_output_0"), ("conv2", "/conv2/Conv_output_0"),
          ("relu2", "/relu2/Relu_output_0"), ("pool2", "/pool2/MaxPool_output_0"),
          ("fc1", "/fc1/Gemm_output_0"), ("relu3", "/relu3/Relu_output_0"),
          ("fc2", "/fc2/Gemm_output_0"), ("relu4", "/relu4/Relu_output_0"), ("fc3", "logits")]
WIDTHS = [6, 6, 6, 16, 16, 16, 120, 120, 84, 84, 10]
INITS = {"conv1.weight": (6, 1, 5, 5), "conv1.bias": (6,), "conv2.weight": (16, 6, 5, 5),
         "conv2.bias": (16,), "fc1.weight": (120, 256), "fc1.bias": (120,),
         "fc2.weight": (84, 120), "fc2.bias": (84,), "fc3.weight": (10, 84), "fc3.bias": (10,)}
ALPHA, BETA, TRY_NUM, GAMMA, P_MIN = 0.02, 0.2, 50, 5.0, 0.01


class LeNet5(nn.Module):
    """bench/torch_bench.py's LeNet-5, with modules for every layer so hooks see them all."""

    def __init__(self):
        super().__init__()
        self.conv1, self.relu1, self.pool1 = nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2)
        self.conv2, self.relu2, self.pool2 = nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2)
        self.flatten = nn.Flatten(1)
        self.fc1, self.relu3 = nn.Linear(256, 120), nn.ReLU()
        self.fc2, self.relu4 = nn.Linear(120, 84), nn.ReLU()
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool1(self.relu1(self.conv1(x)))
        x = self.flatten(self.pool2(self.relu2(self.conv2(x))))
        return self.fc3(self.relu4(self.fc2(self.relu3(self.fc1(x)))))


def load_model(path):
    g = onnx.load(path).graph
    w = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    missing = [n for n in INITS if n not in w]
    if missing:
        sys.exit(f"fuzz_torch: {path}: not LeNet-5: no initializer {', '.join(missing)} "
                 f"(has {', '.join(sorted(w))})")
    for n, s in INITS.items():
        assert tuple(w[n].shape) == s, f"{path}: {n} has shape {w[n].shape}, expected {s}"
    m = LeNet5()
    m.load_state_dict({n: torch.from_numpy(np.array(w[n], np.float32)) for n in INITS})
    return m.eval()


def read_idx(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = struct.unpack(">" + "I" * nd, b[4:4 + 4 * nd])
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


def named_set(spec):
    """fashion-mnist:train|test, mnist:...: uint8 images [n,1,28,28], labels [n]."""
    name, _, split = spec.partition(":")
    d = {"fashion-mnist": "/usr/share/datasets/fashion-mnist",
         "mnist": "/usr/share/datasets/mnist"}[name]
    pre = "t10k" if split in ("test", "t10k") else "train"
    f = lambda kind: next(p for p in (f"{d}/{pre}-{kind}-idx{3 if kind == 'images' else 1}"
                                      f"-ubyte{z}" for z in (".gz", "")) if os.path.exists(p))
    return read_idx(f("images"))[:, None], read_idx(f("labels")).astype(np.int64)


class Probe:
    """Forward hooks on the layers; neuron values = channel means (conv) or the units."""

    def __init__(self, model, names):
        self.outs = []
        mods = dict(model.named_modules())
        for n in names:
            mods[n].register_forward_hook(lambda mod, inp, out: self.outs.append(out))

    def run(self, model, x, need_range=False):
        self.outs.clear()
        logits = model(x)
        vals = torch.cat([o.mean((2, 3)) if o.dim() == 4 else o for o in self.outs], 1)
        rng = None
        if need_range:  # per input and layer: min / max of the whole output tensor
            rng = [(o.flatten(1).amin(1), o.flatten(1).amax(1)) for o in self.outs]
        return logits, vals, rng


def read_profile(path):
    """A flare profile (docs/coverage.md) or an npz: (layer names or None, min, max)."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:8] != b"FLPROFIL":
        z = np.load(path)
        return None, z["min"].astype(np.float64), z["max"].astype(np.float64)
    _, nl, total, _ = struct.unpack_from("<IIqq", b, 8)
    off, names = 32, []
    for _ in range(nl):
        (ln,) = struct.unpack_from("<I", b, off)
        names.append(b[off + 4:off + 4 + ln].decode())
        off += 4 + ln + 8
    lo = np.frombuffer(b, np.float32, total, off).astype(np.float64)
    hi = np.frombuffer(b, np.float32, total, off + 4 * total).astype(np.float64)
    return names, lo, hi


class Cover:
    """KMNC or NC with sequential added flags over a bit set of items."""

    def __init__(self, crit, lo=None, hi=None, cols=None, layer_slices=None):
        name, _, p = crit.partition(":")
        self.kind, self.cols, self.slices = name, cols, layer_slices
        if name == "kmnc":
            self.K = int(p or 1000)
            self.lo, self.hi = lo, hi
            self.live = hi > lo  # constant neurons have no sections
            self.width = (hi - lo) / self.K
            self.width[~self.live] = 1.0
            self.total = int(self.live.sum()) * self.K
            self.covered = np.zeros(len(lo) * self.K, bool)
        elif name == "nc":
            self.T = float(p or 0.5)
            self.total = len(cols)
            self.covered = np.zeros(len(cols), bool)
        else:
            sys.exit(f"fuzz_torch: criterion '{crit}': expected kmnc:K or nc:T")

    def update(self, vals, rng):
        """vals: torch [B, all neurons]; returns added flags [B] (numpy bool)."""
        v = vals[:, self.cols].double().numpy()
        B, N = v.shape
        if self.kind == "kmnc":
            idx = np.floor((v - self.lo) / self.width)
            idx[v == self.hi] = self.K - 1
            ok = self.live & (v >= self.lo) & (v <= self.hi)
            items = np.arange(N) * self.K + np.where(ok, idx, 0).astype(np.int64)
        else:
            parts = []
            for (a, b), (mn, mx) in zip(self.slices, rng):
                mn, mx = mn.double().numpy()[:, None], mx.double().numpy()[:, None]
                with np.errstate(invalid="ignore", divide="ignore"):
                    parts.append((v[:, a:b] - mn) / (mx - mn))
            ok = np.concatenate(parts, 1) > self.T  # NaN (constant layer): never above
            items = np.broadcast_to(np.arange(N), (B, N))
        new = ok & ~self.covered[items]
        added = np.zeros(B, bool)
        ids = items[new]  # row-major: earlier inputs first
        if len(ids):
            u, first = np.unique(ids, return_index=True)
            added[np.nonzero(new)[0][first]] = True
            self.covered[u] = True
        return added

    def count(self):
        return int(self.covered.sum())


# ---- DeepHunter's transformations on uint8 [1,28,28] ----------------------------------------
def _gauss(k):
    t = {3: [1, 2, 1], 5: [1, 4, 6, 4, 1], 7: [1, 3.5, 7, 9, 7, 3.5, 1]}[k]  # OpenCV's tables
    g = torch.tensor(t, dtype=torch.float32)
    g = g / g.sum()
    return torch.outer(g, g)


class Menu:
    def __init__(self, h, w, flat=False):
        self.h, self.w, self.n, self.flat = h, w, h * w, flat
        aff = ([("translate", float(p)) for p in range(-3, 3)] +
               [("scale", k * 0.1) for k in range(7, 12)] +
               [("shear", k * 0.1) for k in range(-6, 6)] +
               [("rotate", float(p)) for p in range(-50, 50)])
        pix = ([("contrast", k * 0.1) for k in range(5, 13)] +
               [("brightness", float(p)) for p in range(-20, 20)] +
               [("blur", p) for p in range(1, 10)] + [("pixel", p) for p in range(1, 10)] +
               [("noise", p) for p in range(1, 4)])
        self.v, self.n_aff = aff + pix, len(aff)
        self.by_kind = {}
        for i, (k, _) in enumerate(self.v):
            self.by_kind.setdefault(k, []).append(i)
        self.kinds_all = list(self.by_kind)
        self.kinds_pix = list(dict.fromkeys(k for k, _ in pix))
        self.grid = {}
        for i, (k, p) in enumerate(aff):  # output -> input map, normalised coords (square)
            if k == "translate":
                th = [[1, 0, -2 * p / w], [0, 1, -2 * p / h]]
            elif k == "scale":
                th = [[1 / p, 0, 0], [0, 1 / p, 0]]
            elif k == "shear":
                th = [[1, -p, 0], [0, 1, 0]]
            else:  # counter-clockwise on screen (y down), as cv2.getRotationMatrix2D
                c, s = np.cos(np.radians(p)), np.sin(np.radians(p))
                th = [[c, -s, 0], [s, c, 0]]
            self.grid[i] = F.affine_grid(torch.tensor([th], dtype=torch.float32),
                                         (1, 1, h, w), align_corners=False)
        # blur ids as DeepHunter's image_blur: 1-3 box 3/4/5, 4-6 Gaussian 3/5/7, 7-8 median
        # 3/5, 9 box 6
        self.blur = {}
        for bid, (kind, k) in {1: ("box", 3), 2: ("box", 4), 3: ("box", 5), 4: ("g", 3),
                               5: ("g", 5), 6: ("g", 7), 7: ("med", 3), 8: ("med", 5),
                               9: ("box", 6)}.items():
            ker = None if kind == "med" else (torch.full((k, k), 1.0 / (k * k)) if kind == "box"
                                              else _gauss(k))
            self.blur[bid] = (kind, k, None if ker is None else ker[None, None])

    def apply(self, i, img, rs):
        """img: uint8 numpy [1,h,w] -> uint8 numpy [1,h,w]."""
        k, p = self.v[i]
        if i < self.n_aff:
            x = torch.from_numpy(img).float()[None]
            y = F.grid_sample(x, self.grid[i], mode="bilinear", padding_mode="zeros",
                              align_corners=False)[0].numpy()
        elif k == "contrast":
            y = img * p
        elif k == "brightness":
            y = img.astype(np.float32) + p
        elif k == "blur":
            kind, ks, ker = self.blur[p]
            x = torch.from_numpy(img).float()[None]
            a, b = ks // 2, ks - 1 - ks // 2  # OpenCV's anchor for even kernels
            if kind == "med":
                x = F.pad(x, (a, b, a, b), mode="replicate")
                y = F.unfold(x, ks).median(1).values.reshape(img.shape).numpy()
            else:
                y = F.conv2d(F.pad(x, (a, b, a, b), mode="reflect"), ker)[0].numpy()
        elif k == "pixel":
            y = img.copy().reshape(-1)
            y[rs.integers(0, y.size, p)] = rs.integers(0, 256, p)
            return y.reshape(img.shape)
        elif p == 1:
            y = img + rs.normal(0.0, 0.1 ** 0.5, img.shape)
        elif p == 2:
            y = img.copy().reshape(-1)
            m = int(np.ceil(0.004 * y.size * 0.5))
            y[rs.integers(0, y.size, m)] = 255
            y[rs.integers(0, y.size, m)] = 0
            return y.reshape(img.shape)
        else:
            y = img + img * rs.standard_normal(img.shape)
        return np.clip(np.rint(y), 0, 255).astype(np.uint8)

    def valid(self, i0, x):
        d = np.abs(x.astype(np.int16) - i0)
        if np.count_nonzero(d) < ALPHA * self.n:
            return True
        return d.max() <= BETA * 255

    def pick(self, lo, rs):
        """DeepHunter's mutate_one: a kind uniformly among those allowed, then one of its
        parameters (flare's deephunter menu, by_kind = 1); flat: any allowed entry."""
        if self.flat:
            return int(rs.integers(lo, len(self.v)))
        kinds = self.kinds_pix if lo else self.kinds_all
        ids = self.by_kind[kinds[int(rs.integers(0, len(kinds)))]]
        return ids[int(rs.integers(0, len(ids)))]

    def mutate(self, img, i0, aff, rs):
        """DeepHunter's Mutate(I): (mutant, new I0, affine used, menu index) or None."""
        n = self.n_aff if aff else 0
        for _ in range(TRY_NUM):
            i = self.pick(n, rs)
            x = self.apply(i, img, rs)
            ref = self.apply(i, i0, rs) if i < self.n_aff else i0
            if self.valid(ref, x):
                return x, ref, aff or i < self.n_aff, i
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("seeds")
    ap.add_argument("labels", nargs="?")
    ap.add_argument("--criterion", default="kmnc:100")
    ap.add_argument("--profile")
    ap.add_argument("--train", default="fashion-mnist:train")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--execs", type=int, default=3000)
    ap.add_argument("--k", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pick", choices=("kind", "flat"), default="kind")
    ap.add_argument("--power", choices=("deephunter", "k"), default="deephunter")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rs = np.random.default_rng(a.seed)
    t_setup = time.perf_counter()
    model = load_model(a.model)
    xs = np.load(a.seeds).astype(np.float32)
    assert xs.ndim == 4 and xs.shape[1:] == (1, 28, 28), f"{a.seeds}: shape {xs.shape}"
    pix = np.clip(np.rint(xs * 255), 0, 255).astype(np.uint8)  # the seeds' 8-bit pixels

    # the criterion's layers: the profile's, else all 11
    starts = np.cumsum([0] + WIDTHS)
    lo = hi = None
    layer_ids = list(range(len(LAYERS)))
    kmnc = a.criterion.startswith("kmnc")
    if a.profile:
        names, lo, hi = read_profile(a.profile)
        if names is not None:
            flare = [f for _, f in LAYERS]
            bad = [n for n in names if n not in flare]
            if bad:
                sys.exit(f"fuzz_torch: {a.profile}: layer {bad[0]} is not one of LeNet-5's")
            layer_ids = [flare.index(n) for n in names]
            if layer_ids != sorted(layer_ids):  # hooks fire in forward order
                sys.exit(f"fuzz_torch: {a.profile}: layers not in the model's order")
    cols = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in layer_ids])
    slices, o = [], 0
    for i in layer_ids:
        slices.append((o, o + WIDTHS[i]))
        o += WIDTHS[i]
    probe = Probe(model, [LAYERS[i][0] for i in layer_ids])
    with torch.no_grad():
        if kmnc and lo is None:  # profile from the training set, batches of 1000
            if a.train.endswith(".npy"):
                tr = torch.from_numpy(np.load(a.train).astype(np.float32))
            else:
                tr = torch.from_numpy(named_set(a.train)[0].copy()).float().div_(255)
            lo = hi = None
            for s in range(0, len(tr), 1000):
                v = probe.run(model, tr[s:s + 1000])[1].double()
                vmin, vmax = v.amin(0), v.amax(0)
                lo = vmin if lo is None else torch.minimum(lo, vmin)
                hi = vmax if hi is None else torch.maximum(hi, vmax)
            lo, hi = lo.numpy(), hi.numpy()
        if kmnc:
            assert len(lo) == len(cols), f"profile has {len(lo)} neurons, layers {len(cols)}"
        cover = Cover(a.criterion, lo, hi, np.arange(len(cols)), slices)

        # labels, then the dry run: correctly classified seeds enter the queue and the coverage
        logits, vals, rng = probe.run(model, torch.from_numpy(pix).float().div_(255), True)
        pred = logits.argmax(1).numpy()
        if a.labels is None:
            labels = pred.copy()
        elif a.labels.endswith(".idx.npy"):
            labels = named_set("fashion-mnist:test")[1][np.load(a.labels)]
        else:
            labels = np.load(a.labels).astype(np.int64)
        assert len(labels) == len(pix), f"{len(labels)} labels for {len(pix)} seeds"
        good = np.nonzero(pred == labels)[0]
        cover.update(vals[good], [(m[good], x[good]) for m, x in rng] if rng else None)
    menu = Menu(28, 28, a.pick == "flat")
    q_img = [pix[i] for i in good]
    q_ref = [pix[i] for i in good]
    q_aff = [False] * len(good)
    q_lab = [int(labels[i]) for i in good]
    q_root = list(range(len(good)))
    # batches: [first entry, entries]; B_c per batch
    b_first = list(range(len(good)))
    b_len = [1] * len(good)
    bc = np.zeros(max(16, 2 * len(good)), np.float64)
    bc_n = len(good)
    cur = 0  # the walk's cursor (DeepHunter's current_id)
    found = set()
    execs = fails = 0
    t_fc = t_mut = 0.0
    setup_s = time.perf_counter() - t_setup

    t0 = time.perf_counter()
    with torch.no_grad():
        while execs < a.execs and bc_n:
            # prob selection, as flare's: the cursor walks the batches in queue order and takes
            # the one under it with its priority (a batch never fuzzed always), else moves on
            while True:
                if cur >= bc_n:
                    cur = 0
                cb, cur = cur, cur + 1
                pr = 1 - bc[cb] / GAMMA if bc[cb] < (1 - P_MIN) * GAMMA else P_MIN
                if pr >= 1 or rs.random() < pr:
                    break
            bc[cb] += 1
            c = b_first[cb] + (int(rs.integers(b_len[cb])) if b_len[cb] > 1 else 0)
            # DeepHunter's power schedule, as flare's: ceil(K * left / budget), 1..K, where
            # budget = beta * 255 * size and left = budget - sum |I - I0|
            tm = time.perf_counter()
            budget = BETA * 255.0 * q_img[c].size
            used = int(np.abs(q_img[c].astype(np.int32) - q_ref[c]).sum())
            P = min(max(int(np.ceil(max(0.0, (budget - used) / budget) * a.k)), 1), a.k)
            if a.power == "k":
                P = a.k
            muts = []
            for _ in range(min(P, a.execs - execs)):
                r = menu.mutate(q_img[c], q_ref[c], q_aff[c], rs)
                if r is not None:
                    muts.append(r)
            t_mut += time.perf_counter() - tm
            if not muts:
                continue
            tf = time.perf_counter()
            x = torch.from_numpy(np.stack([m[0] for m in muts])).float().div_(255)
            logits, vals, rng = probe.run(model, x, cover.kind == "nc")
            added = cover.update(vals, rng)
            pred = logits.argmax(1).numpy()
            t_fc += time.perf_counter() - tf
            execs += len(muts)
            bad = pred != q_lab[c]
            for j in np.nonzero(bad)[0]:
                fails += 1
                found.add((q_lab[c], int(pred[j]), q_root[c]))
            keep = np.nonzero(added & ~bad)[0]
            if len(keep):  # one new batch
                b_first.append(len(q_img))
                b_len.append(len(keep))
                if bc_n == len(bc):
                    bc = np.concatenate([bc, np.zeros(len(bc))])
                bc_n += 1
            for j in keep:
                img, ref, aff, _ = muts[j]
                q_img.append(img)
                q_ref.append(ref)
                q_aff.append(aff)
                q_lab.append(q_lab[c])
                q_root.append(q_root[c])
    secs = time.perf_counter() - t0
    crit_name = a.criterion.partition(":")[0]
    print(json.dumps({
        "name": f"fuzz_deephunter_{crit_name}", "criterion": a.criterion, "execs": execs,
        "seconds": round(secs, 4), "mutants_per_s": round(execs / secs, 1) if secs else 0.0,
        "corpus": len(q_img), "covered": cover.count(), "total": cover.total,
        "coverage": round(cover.count() / cover.total, 6), "failures": len(found),
        "failures_total": fails, "threads": a.threads, "k": a.k, "seeds_used": len(good),
        "seeds_dropped": len(pix) - len(good), "pick": a.pick, "power": a.power, "forward_cover_s": round(t_fc, 4),
        "forward_cover_share": round(t_fc / secs, 4) if secs else 0.0,
        "mutate_s": round(t_mut, 4), "setup_s": round(setup_s, 3)}))


if __name__ == "__main__":
    main()
