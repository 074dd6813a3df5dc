#!/usr/bin/python3
"""Export the torchvision classification zoo to ONNX for tests/test_zoo.c.

Usage: tests/zoo/export.py OUTDIR [--full] [--opsets=13,17] [NAME ...]

Every architecture is built from torchvision's own classes with random weights (never
downloaded), put in eval mode, and exported with torch.onnx.export at opsets 13 and 17 (or
--opsets) with a free batch dimension. Per model and opset, OUTDIR/NAME-opOPSET/ gets
model.onnx, x.npy (the input: batch 2 at opset 13, batch 5 at opset 17, so that both batch
sizes run, 3 at any other opset), y.npy (torch's logits), seed.npy (a fixed random seed of
the logits' shape) and gx.npy (torch.autograd's gradient of sum(logits * seed) with respect
to x). OUTDIR/manifest.txt has one line per pair:
    NAME OPSET BATCH EXPORT_MS TORCH_FORWARD_MS TORCH_BACKWARD_MS ok
or, when torch itself cannot export the pair,
    NAME OPSET - - - - export-failed: MESSAGE
and is written last, so a partial run is never mistaken for a cache.

At ImageNet size, opset 17 only and batch 1 (BIG below): NAME_224 is NAME at 3x224x224
(MobileNetV2), so that the strides, paddings and pooling windows a 64x64 input
never reaches (7x7 final feature maps, a 7x7 global pool) run against torch too.

The default configurations keep CI short: 64x64 inputs (75x75 for Inception v3, its minimum),
and reduced ConvNeXt / ViT / Swin built from the torchvision classes. --full uses the named
variants (convnext_tiny, vit_b_16 at image_size 64, swin_t) instead; it is slow. Two worker
processes export in parallel, one torch thread each (the torch times are for 1 thread).

BatchNorm and LayerNorm get random statistics and affine parameters, and ConvNeXt's layer scale
a random value near 1 (torchvision's 1e-6 would make every block an identity), ViT's head and
class token random values (torchvision starts them at zero), so no layer is
an identity and a wrong normalisation shows in the logits.
"""
import multiprocessing
import os
import sys
import time

import numpy as np
import torch
import torchvision.models as tvm
from torchvision.models.convnext import CNBlock, CNBlockConfig, ConvNeXt
from torchvision.models.swin_transformer import SwinTransformer
from torchvision.models.vision_transformer import VisionTransformer

import atomic

OPSETS = (13, 17)
BATCH = {13: 2, 17: 5}
# torch's default export (eval mode, constant folding) folds every BatchNormalization that
# follows a convolution into its weights; at this opset the model is exported as it is
# (TrainingMode.PRESERVE of an eval-mode model, no folding), so that the BatchNormalization
# nodes, with their random statistics, reach flare too.
KEEP_BN_OPSET = 17


# name -> (constructor, side, batch): exported at opset 17 only (when it is in --opsets)
BIG = {
    "mobilenet_v2_224": (lambda: tvm.mobilenet_v2(), 224, 1),
}
BIG_OPSET = 17


def reduced(full):
    """name -> (constructor, input side). The small configurations keep every block type."""
    if full:
        big = {
            "convnext_tiny": (lambda: tvm.convnext_tiny(), 64),
            "vit_b_16": (lambda: tvm.vit_b_16(image_size=64), 64),
            "swin_t": (lambda: tvm.swin_t(), 64),
        }
    else:
        big = {
            "convnext_mini": (lambda: ConvNeXt([CNBlockConfig(16, 32, 2), CNBlockConfig(32, 64, 2),
                                                CNBlockConfig(64, None, 2)]), 64),
            "vit_mini": (lambda: VisionTransformer(image_size=64, patch_size=16, num_layers=2,
                                                   num_heads=2, hidden_dim=32, mlp_dim=64), 64),
            "swin_mini": (lambda: SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2],
                                                  num_heads=[1, 2], window_size=[4, 4]), 64),
        }
    zoo = {
        "resnet18": (lambda: tvm.resnet18(), 64),
        "densenet121": (lambda: tvm.densenet121(), 64),
        "inception_v3": (lambda: tvm.inception_v3(aux_logits=False, init_weights=True), 75),
        "mobilenet_v2": (lambda: tvm.mobilenet_v2(), 64),
        "mobilenet_v3_small": (lambda: tvm.mobilenet_v3_small(), 64),
        "shufflenet_v2_x0_5": (lambda: tvm.shufflenet_v2_x0_5(), 64),
        "mnasnet0_5": (lambda: tvm.mnasnet0_5(), 64),
        "efficientnet_b0": (lambda: tvm.efficientnet_b0(), 64),
        "regnet_y_400mf": (lambda: tvm.regnet_y_400mf(), 64),
    }
    zoo.update(big)
    return zoo


def randomize_norms(model, g):
    for mod in model.modules():
        if isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.BatchNorm1d)):
            n = mod.num_features
            mod.running_mean.copy_(0.1 * torch.randn(n, generator=g))
            mod.running_var.copy_(0.5 + torch.rand(n, generator=g))
        if isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.BatchNorm1d, torch.nn.LayerNorm)):
            if mod.weight is not None:
                mod.weight.copy_(0.5 + torch.rand(mod.weight.shape, generator=g))
                mod.bias.copy_(0.1 * torch.randn(mod.bias.shape, generator=g))
        if isinstance(mod, VisionTransformer):  # its head and class token start at zero
            mod.heads.head.weight.copy_(0.05 * torch.randn(mod.heads.head.weight.shape, generator=g))
            mod.class_token.copy_(torch.randn(mod.class_token.shape, generator=g))
        if isinstance(mod, CNBlock):
            mod.layer_scale.copy_(0.5 + 0.5 * torch.rand(mod.layer_scale.shape, generator=g))


def input_grad(model, x, seed, timed=False):
    """d sum(model(x) * seed) / dx; timed: also the forward and backward seconds of a second
    run (the first one pays torch's one-off costs)."""
    for _ in range(2 if timed else 1):
        xg = x.clone().requires_grad_(True)
        t0 = time.perf_counter()
        y = model(xg)
        t1 = time.perf_counter()
        (y * seed).sum().backward()
        t2 = time.perf_counter()
    return xg.grad.detach(), t1 - t0, t2 - t1


def export_one(name, make, side, opset, outdir, n=None):
    torch.manual_seed(0)
    model = make().eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        randomize_norms(model, g)
    n = n or BATCH.get(opset, 3)
    x = torch.randn(n, 3, side, side, generator=g)
    d = os.path.join(outdir, "%s-op%d" % (name, opset))
    os.makedirs(d, exist_ok=True)
    # not under no_grad: there nn.MultiheadAttention takes its fused fast path
    # (aten::_native_multi_head_attention), which torch 1.13 cannot export
    te = time.perf_counter()
    keep_bn = opset == KEEP_BN_OPSET
    torch.onnx.export(model, x, os.path.join(d, "model.onnx"), opset_version=opset,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
                      training=torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL,
                      do_constant_folding=not keep_bn)
    te = time.perf_counter() - te
    seed = torch.randn((n, 1000), generator=g)
    gx, fwd_s, bwd_s = input_grad(model, x, seed, timed=True)
    with torch.no_grad():
        y = model(x)
    for f, a in (("x", x), ("y", y), ("seed", seed), ("gx", gx)):
        np.save(os.path.join(d, f + ".npy"), a.numpy().astype(np.float32))
    return "%s %d %d %.0f %.1f %.1f ok" % (name, opset, n, 1e3 * te, 1e3 * fwd_s, 1e3 * bwd_s)


def job(name, opset, full, outdir):
    """One model at one opset, in a worker process: 1 torch thread each, 2 workers."""
    torch.set_num_threads(1)
    make, side, n = BIG[name] if name in BIG else reduced(full)[name] + (None,)
    try:
        line = export_one(name, make, side, opset, outdir, n)
    except Exception as ex:  # torch's exporter refuses: a result, not a crash
        line = "%s %d - - - - export-failed: %s" % (name, opset, " ".join(str(ex).split())[:200])
    print(line, flush=True)
    return line


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    if not args:
        sys.exit(__doc__)
    outdir, names, full = args[0], args[1:], "--full" in argv
    opsets = OPSETS
    for a in argv:
        if a.startswith("--opsets="):
            opsets = [int(o) for o in a[len("--opsets="):].split(",")]
    zoo = reduced(full)
    for nm in names:
        if nm not in zoo and nm not in BIG:
            sys.exit("export.py: unknown model %s (known: %s)" % (nm, " ".join(list(zoo) + list(BIG))))
    os.makedirs(outdir, exist_ok=True)
    # the 224x224 ones first: the longest jobs start while the pool has both workers
    jobs = [(nm, BIG_OPSET, full, outdir) for nm in BIG if (not names or nm in names) and BIG_OPSET in opsets]
    jobs += [(nm, op, full, outdir) for nm in zoo if not names or nm in names for op in opsets]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        lines = pool.starmap(job, jobs, chunksize=1)
    atomic.write_text(os.path.join(outdir, "manifest.txt"), lines)


if __name__ == "__main__":
    main(sys.argv[1:])
