#!/usr/bin/python3
"""flare's LSA against gaussian_kde computed by its definition in float64 (numpy only: no
scipy needed), on the traces `bench_sa dump DIR` wrote and the values `bench_sa run DIR`
left in DIR/flare_lsa.npy (float32: agreement below ~6e-8 relative is that file's rounding).

    lsa_double.py DIR

Per class (sadl's variance filter first, threshold 1e-5 over every class): the kernel
covariance n^(-2/(d+4)) np.cov(x, ddof=1), whitening by the Cholesky factor of its inverse
(as scipy does), each kernel's exponent from the *differences* of whitened rows in float64,
logsumexp, minus log det(2 pi K) / 2 and log n. Prints one JSON line: the largest relative
difference, where, and how many inputs exceed 1e-5 and 1e-6.
"""
import json
import sys

import numpy as np

d = sys.argv[1]
tr32 = np.load(d + "/train_ats.npy")
tp = np.load(d + "/train_pred.npy")
te = np.load(d + "/test_ats.npy").astype(np.float64)
qp = np.load(d + "/test_pred.npy")
flare = np.load(d + "/flare_lsa.npy").astype(np.float64)
removed = set()
for c in np.unique(tp):
    removed |= set(np.where(np.var(tr32[tp == c], axis=0) < 1e-5)[0])
keep = [j for j in range(tr32.shape[1]) if j not in removed]
tr = tr32.astype(np.float64)[:, keep]
te = te[:, keep]
ref = np.full(len(te), np.nan)
for c in np.unique(qp):
    x = tr[tp == c]
    if len(x) == 0:
        continue
    n, dim = x.shape
    cov = np.cov(x.T, ddof=1) * n ** (-2.0 / (dim + 4))
    white = np.linalg.cholesky(np.linalg.inv(cov))
    xw = x @ white
    idx = np.where(qp == c)[0]
    qw = te[idx] @ white
    lognorm = -0.5 * np.linalg.slogdet(2 * np.pi * cov)[1] - np.log(n)
    for s in range(0, len(idx), 100):
        a = -0.5 * ((qw[s:s + 100, None, :] - xw[None, :, :]) ** 2).sum(-1)
        m = a.max(1)
        ref[idx[s:s + 100]] = -(m + np.log(np.exp(a - m[:, None]).sum(1)) + lognorm)
ok = ~np.isnan(ref)
rel = np.abs(flare[ok] - ref[ok]) / np.abs(ref[ok])
i = int(np.argmax(rel))
print(json.dumps({"name": "sa_lsa_vs_double", "inputs": int(ok.sum()), "dim": len(keep),
                  "max_rel": float(rel[i]), "at_value": float(ref[ok][i]),
                  "over_1e-5": int((rel > 1e-5).sum()), "over_1e-6": int((rel > 1e-6).sum())}))
