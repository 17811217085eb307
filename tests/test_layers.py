"""The shape of the code (ARCHITECTURE.md): imports run one way, from the CLIs down to the
layers; no two modules import each other; task code reads no flags; CLIs stay thin.

The import graph is read from the source with :mod:`ast` (every ``import``, including
the ones inside functions), so a lazy import cannot hide an arrow that points up.
"""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("acvi_tf", "experiments", "benchmarks")
# acvi_tf's layers, lowest first: a module may import its own layer and the ones below.
LAYERS = [
    {"acvi_tf", "acvi_tf.utils", "acvi_tf.registry", "acvi_tf.errors"},
    {"acvi_tf.metrics"},
    {"acvi_tf.attention"},
    {"acvi_tf.layers"},  # the public Keras layer ACVIAttention (issue 37)
    {"acvi_tf.latent"},
    {"acvi_tf.decoding"},
    {"acvi_tf.models"},
    {"acvi_tf.data"},
    {"acvi_tf.training"},
    {"acvi_tf.run"},  # the run directory: its files, results.json, restore
    {"acvi_tf.export"},
    {"acvi_tf.tasks"},
    {"acvi_tf.setup_check"},
]
# The package root's lazy public exports (``acvi_tf.ACVIAttention``, imported on first
# use): the one arrow allowed to point up.
ROOT_EXPORTS = {("acvi_tf", "acvi_tf.layers")}
# Who may import whom between the top-level packages.
# benchmarks sit on top: the GPU-hour estimate reads the tables' flagfiles through the CLIs.
MAY_IMPORT = {"acvi_tf": {"acvi_tf"}, "experiments": {"acvi_tf", "experiments"},
              "benchmarks": {"acvi_tf", "experiments", "benchmarks"}}
# The absl/argparse command lines of experiments/ (issue 13: at most 300 lines each).
CLIS = ["experiments/translate.py", "experiments/summarize.py", "experiments/caption.py",
        "experiments/acvi_study/__main__.py", "experiments/tables/runner.py"]


def _modules():
    """{module name: file path} of every module of the three packages."""
    out = {}
    for pkg in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, pkg)):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(folder, f)
                    name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _imports(name, path):
    """The project modules ``name`` imports (the module itself when it is one, else the
    package a name is imported from)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    is_package = path.endswith("__init__.py")
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_package else base[:-1]
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module
                       for a in node.names]
        else:
            continue
        for t in targets:
            while t not in MODULES and "." in t:  # `import a.b.c` names the module a.b.c
                t = t.rsplit(".", 1)[0]
            if t in MODULES and t != name:
                found.add(t)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(module):
    for i, layer in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in layer if p != "acvi_tf"):
            return i
    return 0 if module == "acvi_tf" else None


def test_the_graph_is_read():
    assert "acvi_tf.attention.base" in GRAPH["acvi_tf.attention.acvi"]
    assert "acvi_tf.models" in GRAPH["acvi_tf.tasks.base"] or any(
        m.startswith("acvi_tf.models") for m in GRAPH["acvi_tf.tasks.base"])


def test_no_two_modules_import_each_other_even_through_others():
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert cycles == []


def test_packages_import_downwards_only():
    wrong = [(a, b) for a, targets in GRAPH.items() for b in targets
             if b.split(".")[0] not in MAY_IMPORT[a.split(".")[0]]]
    assert wrong == []


def test_acvi_tf_layers_import_their_own_layer_and_below():
    unplaced = sorted(m for m in MODULES if m.startswith("acvi_tf") and _layer(m) is None)
    assert unplaced == [], "give these modules a layer in LAYERS"
    up = [(a, b) for a, targets in GRAPH.items() if a.startswith("acvi_tf")
          for b in targets if _layer(b) > _layer(a) and (a, b) not in ROOT_EXPORTS]
    assert up == []


def test_task_code_reads_no_flags():
    readers = []
    for name, path in MODULES.items():
        if not name.startswith("acvi_tf"):
            continue
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "absl" and any(
                    a.name == "flags" for a in node.names):
                readers.append(name)
            elif isinstance(node, ast.Import) and any(a.name == "absl.flags" for a in node.names):
                readers.append(name)
    assert readers == []


@pytest.mark.parametrize("cli", CLIS)
def test_every_cli_is_thin(cli):
    with open(os.path.join(ROOT, cli), encoding="utf-8") as f:
        assert len(f.readlines()) <= 300


def test_no_module_of_the_package_or_the_benchmarks_is_over_500_lines():
    # issue 36: a module that outgrows this is doing more than one job; split it by job
    long = {}
    for name, path in MODULES.items():
        if name.startswith(("acvi_tf", "benchmarks")):
            with open(path, encoding="utf-8") as f:
                n = len(f.readlines())
            if n > 500:
                long[name] = n
    assert long == {}


def test_the_flag_declarations_stay_short():
    # issue 36: flags are generated from the config dataclasses, so flags.py stays small
    with open(os.path.join(ROOT, "experiments", "flags.py"), encoding="utf-8") as f:
        assert len(f.readlines()) < 250
