#!/usr/bin/python3
"""FID and IS of features that `flare nn run --layer` wrote, computed the reference way, to set
beside `flare nn quality` (docs/quality.md, "Parity"). numpy and scipy from Debian.

    scripts/quality_parity.py REAL_FEATS.npy FAKE_FEATS.npy REAL_LOGITS.npy [SPLITS]

FID two ways: pytorch-fid's calculate_frechet_distance (np.cov, scipy.linalg.sqrtm of the
product, its real part; when sqrtm fails — singular covariances, e.g. dead ReLUs — 1e-6 I is
added to both, which moves the result), and numpy's symmetric eigh of S_r^(1/2) S_f S_r^(1/2),
the method flare uses with LAPACK.
IS: the original code (openai/improved-gan) on softmax(REAL_LOGITS), contiguous splits: compare
with `flare nn quality --in-order`.
"""
import sys

import numpy as np
from scipy import linalg


def fid(x, y):
    """(pytorch-fid's value, whether it needed the offset, the eigh value)"""
    x, y = x.astype(np.float64), y.astype(np.float64)
    mu1, mu2 = x.mean(0), y.mean(0)
    s1, s2 = np.cov(x, rowvar=False), np.cov(y, rowvar=False)
    d = mu1 - mu2
    base = d.dot(d) + np.trace(s1) + np.trace(s2)
    covmean, _ = linalg.sqrtm(s1.dot(s2), disp=False)
    offset = not np.isfinite(covmean).all()
    if offset:  # pytorch-fid's fallback
        off = np.eye(s1.shape[0]) * 1e-6
        covmean = linalg.sqrtm((s1 + off).dot(s2 + off))
    w, v = np.linalg.eigh(s1)
    a = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    m = a @ s2 @ a
    tr = np.sqrt(np.clip(np.linalg.eigvalsh((m + m.T) / 2), 0, None)).sum()
    return float(base - 2 * np.trace(covmean.real)), offset, float(base - 2 * tr)


def inception_score(logits, splits):
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    n, scores = p.shape[0], []
    for i in range(splits):
        part = p[i * n // splits:(i + 1) * n // splits, :]
        kl = part * (np.log(part) - np.log(np.mean(part, 0, keepdims=True)))
        scores.append(np.exp(np.mean(np.sum(kl, 1))))
    return float(np.mean(scores)), float(np.std(scores))


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    real, fake, logits = (np.load(a) for a in sys.argv[1:4])
    splits = int(sys.argv[4]) if len(sys.argv) == 5 else 10
    m, s = inception_score(logits, splits)
    print("IS(real)   %.6f +- %.6f (%d splits)" % (m, s, splits))
    f, offset, f_eigh = fid(real, fake)
    print("FID        %.9f (pytorch-fid%s)" % (f, ", sqrtm failed: 1e-6 I added" if offset else ""))
    print("FID        %.9f (symmetric eigh)" % f_eigh)


if __name__ == "__main__":
    main()
