#!/usr/bin/env python3
"""The dependency graph between flare's modules, read from the real #include lines; fails
(exit 1) on a cycle. docs/architecture.md explains the graph it prints.

    scripts/modgraph.py                 print "module -> modules it includes", check cycles
    scripts/modgraph.py --dot           the same graph in Graphviz dot
    scripts/modgraph.py --calls build   also check, from the objects in build/obj (nm), that
                                        no two files of one module call each other

Modules: src/<m>/ is module <m>, src/agents/<m>/ is module agents/<m>. A public header belongs
to the module it is named after (include/flare/cover.h: cover; include/flare/agents/llm.h:
agents/llm), else to the module whose folder holds the .c file of its name
(include/flare/lrp.h: src/sa/lrp.c, so sa); flare/flare.h is core's. A private header
("agents/campaign/campaign_int.h", "cover_int.h") belongs to the folder it lies in. Module A
depends on module B when a file of A (a .c file or a header) includes a header of B.

A cycle between modules, or two files of one module that call each other (A calls a function
defined in B and B one defined in A), fails the check unless it is listed in KNOWN below with
the reason it is still there. A listed cycle that no longer exists fails too, so that the
list only shrinks.
"""
import collections
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# Module cycles not yet broken, each with its reason.
KNOWN_MODULE_CYCLES = {
    frozenset(["cover", "sa"]): "cover's criterion registry (registry.c) dispatches to the LSC "
    "and DSC criteria of sa/sa_cover.c and IDC (idc.c) reads LRP importance (sa/lrp.h), while "
    "sa builds on cover's layer sets; src/sa is changed by other work, not by this layout",
}
# File pairs of one module that still call each other, each with its reason.
KNOWN_CALL_PAIRS = {}
# Folders whose files are not checked pairwise (their two-way calls are printed, not failed):
#   src/cli/   flags.c holds the command table that names every command's entry point and each
#              command calls flags.c's parsers (a table of callbacks, not a layering of helpers);
CALLS_UNCHECKED = ("src/cli/",)

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def rel(p):
    return os.path.relpath(p, ROOT)


def module_of_source(path):
    """Module of a file under src/ (a path relative to ROOT), or None."""
    parts = path.split("/")
    if parts[0] != "src" or len(parts) < 3:
        return None
    if parts[1] == "agents":
        return "agents/" + parts[2] if len(parts) >= 4 else None
    return parts[1]


def module_of_public(path):
    """Module of a public header include/flare/[agents/]NAME.h."""
    parts = path.split("/")
    name = parts[-1][:-2]
    if parts[:2] != ["include", "flare"]:
        return None
    if len(parts) == 4 and parts[2] == "agents":
        if os.path.isdir(os.path.join(ROOT, "src/agents", name)):
            return "agents/" + name
        hits = glob.glob(os.path.join(ROOT, "src/agents/*", name + ".c"))
    elif len(parts) == 3:
        if name == "flare":
            return "core"
        if os.path.isdir(os.path.join(ROOT, "src", name)) and name != "agents":
            return name
        hits = glob.glob(os.path.join(ROOT, "src/*", name + ".c"))
    else:
        return None
    if len(hits) != 1:
        sys.exit("modgraph: cannot place %s in a module (found %d files named %s.c)"
                 % (path, len(hits), name))
    return module_of_source(rel(hits[0]))


def module_of(path):
    return module_of_public(path) if path.startswith("include/") else module_of_source(path)


def resolve(includer, name):
    """The file an #include "name" in includer refers to (the compiler's -Iinclude -Isrc and
    the includer's own folder), relative to ROOT; None for generated or outside headers."""
    for base in (os.path.dirname(includer), "include", "src"):
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(ROOT, p)):
            return p
    return None


def files():
    pats = ["src/**/*.c", "src/**/*.h", "src/**/*.def", "include/flare/**/*.h"]
    out = set()
    for pat in pats:
        out.update(rel(p) for p in glob.glob(os.path.join(ROOT, pat), recursive=True))
    return sorted(out)


def include_graph():
    """{module: {module it depends on: [(file, included header), ...]}}"""
    g = collections.defaultdict(lambda: collections.defaultdict(list))
    for f in files():
        m = module_of(f)
        if m is None:
            continue
        g[m]  # every module appears, even one that includes nothing
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for name in INCLUDE.findall(text):
            target = resolve(f, name)
            if target is None:
                continue
            tm = module_of(target)
            if tm is not None and tm != m:
                g[m][tm].append((f, name))
    return g


def sccs(g):
    """Strongly connected components of more than one node (Tarjan), sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def check_modules(g):
    bad = 0
    found = set()
    for comp in sccs(g):
        key = frozenset(comp)
        if key in KNOWN_MODULE_CYCLES:
            found.add(key)
            print("known cycle (not yet broken): %s\n    %s" % (" <-> ".join(comp),
                                                              KNOWN_MODULE_CYCLES[key]))
            continue
        bad = 1
        print("CYCLE between modules: %s" % " <-> ".join(comp))
        for a in comp:
            for b in comp:
                if b in g[a]:
                    f, h = g[a][b][0]
                    print("    %s -> %s: %s includes \"%s\"%s" % (
                        a, b, f, h, " (and %d more)" % (len(g[a][b]) - 1) if len(g[a][b]) > 1 else ""))
    for key in set(KNOWN_MODULE_CYCLES) - found:
        bad = 1
        print("listed cycle %s no longer exists: remove it from KNOWN_MODULE_CYCLES in %s"
              % (" <-> ".join(sorted(key)), rel(__file__)))
    return bad


def check_calls(build):
    """Two files of one module that call each other, from nm of build/obj/src/**/*.o."""
    objs = sorted(glob.glob(os.path.join(build, "obj/src/**/*.o"), recursive=True))
    if not objs:
        sys.exit("modgraph: no objects under %s/obj/src (build first)" % build)
    defs, uses = {}, collections.defaultdict(set)
    prefix = os.path.join(build, "obj") + os.sep
    # objects left behind by files that moved are skipped; one nm call for all (-A: each
    # line starts with "OBJECT:")
    objs = [o for o in objs if os.path.isfile(os.path.join(ROOT, o[len(prefix):-2] + ".c"))]
    out = subprocess.run(["nm", "-A"] + objs, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        obj, _, rest = line.partition(".o:")
        src = obj[len(prefix):] + ".c"
        p = rest.split()
        if len(p) == 3 and p[1] in "TDBRCGSV":
            defs[p[2]] = src
        elif len(p) == 2 and p[0] == "U":
            uses[src].add(p[1])
    calls = collections.defaultdict(lambda: collections.defaultdict(set))
    for f, syms in uses.items():
        for s in syms:
            d = defs.get(s)
            if d and d != f and module_of(d) == module_of(f):
                calls[f][d].add(s)
    bad = 0
    found = set()
    for a in sorted(calls):
        for b in sorted(calls[a]):
            if a >= b or a not in calls.get(b, {}):
                continue
            if a.startswith(CALLS_UNCHECKED):
                if not a.startswith("src/cli/"):
                    print("not checked (%s): %s <-> %s" % (a.split("/")[1], a, b))
                continue
            key = frozenset([a, b])
            if key in KNOWN_CALL_PAIRS:
                found.add(key)
                print("known two-way calls (not yet broken): %s <-> %s (%s)"
                      % (a, b, KNOWN_CALL_PAIRS[key]))
                continue
            bad = 1
            print("FILES CALL EACH OTHER: %s <-> %s\n    %s calls %s\n    %s calls %s" % (
                a, b, a, ", ".join(sorted(calls[a][b])), b, ", ".join(sorted(calls[b][a]))))
    for key in set(KNOWN_CALL_PAIRS) - found:
        bad = 1
        print("listed pair %s no longer calls both ways: remove it from KNOWN_CALL_PAIRS in %s"
              % (" <-> ".join(sorted(key)), rel(__file__)))
    return bad


def main(argv):
    dot = "--dot" in argv
    build = None
    if "--calls" in argv:
        i = argv.index("--calls")
        if i + 1 >= len(argv):
            sys.exit("usage: scripts/modgraph.py [--dot] [--calls BUILD_DIR]")
        build = argv[i + 1]
    g = include_graph()
    if dot:
        print("digraph flare {\n  rankdir=BT;")
        for a in sorted(g):
            for b in sorted(g[a]):
                print('  "%s" -> "%s";' % (a, b))
        print("}")
        return 0
    for a in sorted(g):
        print("%-16s -> %s" % (a, " ".join(sorted(g[a])) or "(nothing)"))
    bad = check_modules(g)
    if build is not None:
        bad |= check_calls(build)
    print("modgraph: %s" % ("FAILED" if bad else "no cycles"))
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
