#!/usr/bin/python3
"""The sadl baseline for bench_sa: LSA and DSA computed the way sadl computes them
(github.com/coinse/sadl, sa.py: fetch_lsa / _get_kdes / _get_lsa, fetch_dsa /
find_closest_at), in numpy + scipy, on the traces `bench_sa dump DIR` wrote.

    sa_baseline.py DIR [threads] [subset]

sadl scores one test input at a time (kde.logpdf per input; for DSA two np.linalg.norm
passes per input, over the class's traces and over all other traces, whose index list it
rebuilds with a set difference each time). That takes minutes on 10 000 inputs, so only the
first `subset` test inputs (default 500) are scored and the per-input time is extrapolated
linearly to the whole test set; the one-off set-up (class index lists, variance filter, one
gaussian_kde per class) is timed in full and added once. Each JSON line says so
("measured_inputs", "extrapolated": true).

When bench_sa run has left DIR/flare_lsa.npy and DIR/flare_dsa.npy, the largest relative
difference between flare and sadl on the measured inputs is reported too.
"""
import json
import os
import sys
import time

threads = sys.argv[2] if len(sys.argv) > 2 else "2"
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = threads

import numpy as np  # noqa: E402  (after the thread settings)
from scipy.stats import gaussian_kde  # noqa: E402

VAR_THRESHOLD = 1e-5


def class_matrix_of(train_pred):
    cm = {}
    for i, label in enumerate(train_pred):
        cm.setdefault(label, []).append(i)
    return cm


def lsa(train_ats, train_pred, test_ats, test_pred, num_classes, subset):
    t0 = time.perf_counter()
    class_matrix = class_matrix_of(train_pred)
    removed_cols = []                                  # sadl's _get_kdes
    for label in range(num_classes):
        col_vectors = np.transpose(train_ats[class_matrix[label]])
        for i in range(col_vectors.shape[0]):
            if np.var(col_vectors[i]) < VAR_THRESHOLD and i not in removed_cols:
                removed_cols.append(i)
    kdes = {}
    for label in range(num_classes):
        refined_ats = np.transpose(train_ats[class_matrix[label]])
        refined_ats = np.delete(refined_ats, removed_cols, axis=0)
        kdes[label] = gaussian_kde(refined_ats)
    t1 = time.perf_counter()
    out = []
    for i, at in enumerate(test_ats[:subset]):         # sadl's fetch_lsa / _get_lsa
        refined_at = np.delete(at, removed_cols, axis=0)
        out.append(-kdes[test_pred[i]].logpdf(np.transpose(refined_at)).item())
    t2 = time.perf_counter()
    return np.array(out), t1 - t0, (t2 - t1) / len(out)


def find_closest_at(at, train_ats):
    dist = np.linalg.norm(at - train_ats, axis=1)
    return (min(dist), train_ats[np.argmin(dist)])


def dsa(train_ats, train_pred, test_ats, test_pred, subset):
    t0 = time.perf_counter()
    class_matrix, all_idx = {}, []
    for i, label in enumerate(train_pred):
        class_matrix.setdefault(label, []).append(i)
        all_idx.append(i)
    t1 = time.perf_counter()
    out = []
    for i, at in enumerate(test_ats[:subset]):         # sadl's fetch_dsa
        label = test_pred[i]
        a_dist, a_dot = find_closest_at(at, train_ats[class_matrix[label]])
        b_dist, _ = find_closest_at(
            a_dot, train_ats[list(set(all_idx) - set(class_matrix[label]))])
        out.append(a_dist / b_dist)
    t2 = time.perf_counter()
    return np.array(out), t1 - t0, (t2 - t1) / len(out)


def agreement(d, name, ours):
    path = os.path.join(d, name)
    if not os.path.exists(path):
        return None
    flare = np.load(path)[:len(ours)].astype(np.float64)
    return float(np.max(np.abs(flare - ours) / np.maximum(np.abs(ours), 1e-12)))


def main():
    d = sys.argv[1]
    subset = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    train_ats = np.load(os.path.join(d, "train_ats.npy"))
    train_pred = np.load(os.path.join(d, "train_pred.npy"))
    test_ats = np.load(os.path.join(d, "test_ats.npy"))
    test_pred = np.load(os.path.join(d, "test_pred.npy"))
    n_test = len(test_ats)
    subset = min(subset, n_test)
    num_classes = int(train_pred.max()) + 1
    for name, fn, args, flare_file in (
            ("sadl_lsa", lsa, (num_classes, subset), "flare_lsa.npy"),
            ("sadl_dsa", dsa, (subset,), "flare_dsa.npy")):
        vals, setup_s, per_input_s = fn(train_ats, train_pred, test_ats, test_pred, *args)
        rec = {"name": name, "n_train": len(train_ats), "n_test": n_test,
               "dim": int(train_ats.shape[1]), "measured_inputs": subset, "extrapolated": True,
               "setup_s": round(setup_s, 4), "per_input_s": round(per_input_s, 6),
               "seconds": round(setup_s + per_input_s * n_test, 3)}
        diff = agreement(d, flare_file, vals)
        if diff is not None:
            rec["max_rel_diff_vs_flare"] = diff
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
