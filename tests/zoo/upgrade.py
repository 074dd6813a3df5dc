#!/usr/bin/python3
"""Convert the zoo's opset-17 exports to opsets 18..21, for tests/test_zoo.c.

Usage: tests/zoo/upgrade.py ZOODIR NAME...

torch 1.13 exports opsets up to 17, and python3-onnx 1.12's version_converter knows no opset
after 17 either, so this script applies the changes of ONNX 1.13-1.16 itself, step by step,
to ZOODIR/NAME-op17/model.onnx and writes ZOODIR/NAME-op17to<N>/model.onnx for N = 18..21:

  17 -> 18  ReduceL1/L2/Max/Mean/Min/Prod/SumSquare/LogSum/LogSumExp: the `axes` attribute
            becomes input 1 (an int64 initializer); Pad with constant pads gets the `axes`
            input (18), listing only the axes it pads (all of them when every pad is zero);
  19 -> 20  torch's GELU expansion x * (erf(x / sqrt 2) + 1) * 0.5 (Div, Erf, Add, Mul, Mul)
            becomes one Gelu node (added in opset 20);
  the other steps change no node these models use (their ops' new versions only add types
  or attributes these graphs leave at their defaults), so only the opset and IR version move.

The inputs and torch's outputs stay in NAME-op17 (the test reuses them). ZOODIR/converted.txt
lists one line per written model, "NAME OPSET NODES_REWRITTEN" (since opset 17), and is written last.
"""
import copy
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

import atomic

REDUCE18 = {"ReduceL1", "ReduceL2", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd",
            "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"}
IR_VERSION = {18: 8, 19: 9, 20: 9, 21: 10}


def constants(g):
    """name -> numpy array of every initializer and Constant node's `value`."""
    c = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            c[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return c


def to18(g):
    count = 0
    consts = constants(g)
    for n in g.node:
        if n.op_type in REDUCE18:
            axes = [a for a in n.attribute if a.name == "axes"]
            if not axes:
                continue
            name = n.name + "_axes18"
            g.initializer.append(numpy_helper.from_array(np.array(axes[0].ints, np.int64), name))
            n.attribute.remove(axes[0])
            n.input.append(name)
            count += 1
        elif n.op_type == "Pad" and len(n.input) >= 2 and n.input[1] in consts and len(n.input) < 4:
            pads = consts[n.input[1]].astype(np.int64)
            rank = len(pads) // 2
            axes = [a for a in range(rank) if pads[a] or pads[a + rank]] or list(range(rank))
            p_name, a_name = n.name + "_pads18", n.name + "_axes18"
            sub = [pads[a] for a in axes] + [pads[a + rank] for a in axes]
            g.initializer.append(numpy_helper.from_array(np.array(sub, np.int64), p_name))
            g.initializer.append(numpy_helper.from_array(np.array(axes, np.int64), a_name))
            n.input[1] = p_name
            while len(n.input) < 3:
                n.input.append("")
            n.input.append(a_name)
            count += 1
    return count


def scalar(consts, name, value):
    v = consts.get(name)
    return v is not None and v.size == 1 and abs(float(v.reshape(-1)[0]) - value) < 1e-6


def to20(g):
    """Div(x, sqrt 2) -> Erf -> Add(1) -> Mul(x, .) -> Mul(., 0.5)  =>  Gelu(x)."""
    consts = constants(g)
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)

    def only_reader(out, op):
        r = readers.get(out, [])
        return r[0] if len(r) == 1 and r[0].op_type == op else None

    drop, count = set(), 0
    for div in g.node:
        if div.op_type != "Div" or not scalar(consts, div.input[1], 2 ** 0.5):
            continue
        x = div.input[0]
        erf = only_reader(div.output[0], "Erf")
        add = erf and only_reader(erf.output[0], "Add")
        if not add or not scalar(consts, add.input[1], 1.0):
            continue
        mul = only_reader(add.output[0], "Mul")
        if not mul or x not in mul.input:
            continue
        half = only_reader(mul.output[0], "Mul")
        if not half or not scalar(consts, half.input[1], 0.5):
            continue
        gelu = helper.make_node("Gelu", [x], [half.output[0]], name=div.name + "_gelu20")
        drop.update(id(n) for n in (erf, add, mul, half))
        div.CopyFrom(gelu)
        count += 1
    keep = [n for n in g.node if id(n) not in drop]
    del g.node[:]
    g.node.extend(keep)
    return count


STEPS = {18: to18, 20: to20}


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    zoo, names = argv[0], argv[1:]
    lines = []
    for name in names:
        m = onnx.load(os.path.join(zoo, "%s-op17" % name, "model.onnx"))
        done = 0
        for opset in range(18, 22):
            m = copy.deepcopy(m)
            count = STEPS[opset](m.graph) if opset in STEPS else 0
            for o in m.opset_import:
                if o.domain in ("", "ai.onnx"):
                    o.version = opset
            m.ir_version = IR_VERSION[opset]
            d = os.path.join(zoo, "%s-op17to%d" % (name, opset))
            os.makedirs(d, exist_ok=True)
            tmp = os.path.join(d, "model.onnx.tmp")
            onnx.save(m, tmp)
            os.replace(tmp, os.path.join(d, "model.onnx"))
            done += count
            lines.append("%s %d %d" % (name, opset, done))
    atomic.write_text(os.path.join(zoo, "converted.txt"), lines)


if __name__ == "__main__":
    main(sys.argv[1:])
