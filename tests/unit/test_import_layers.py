"""The package's structure, read from its source by AST (no imports, no subprocesses): which
side may import which, no import circles, and every reference a docstring or a docs page makes
(a ``:mod:``/``:func:``/``:class:``/``:meth:`` target in ``sparktf``, a ``tests/...`` path)
names something that exists.

The sides (docs/architecture.md): ``common`` imports no side; ``node`` (the TF process)
imports neither ``driver`` nor ``task``; ``task`` (the Spark barrier task) not ``driver``.
Within the driver, the pure job core ``driver.job`` imports no pyspark, by itself or through
what it imports, and nothing of ``driver`` outside ``job``.
Every import counts, a function's too; a ``TYPE_CHECKING`` one is a type, not an import.
"""

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "sparktf")

#: side -> the sides it may never import
FORBIDDEN = {"common": ("driver", "task", "node"), "node": ("driver", "task"), "task": ("driver",)}


def _modules():
    found = {}
    for dirpath, _, files in os.walk(PKG):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                mod = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                package = mod.endswith(".__init__")
                found[mod[: -len(".__init__")] if package else mod] = (path, package)
    return found


MODULES = _modules()


def _type_checking_blocks(tree):
    return {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for stmt in block.body
        for node in ast.walk(stmt)
    }


def imports(mod):
    """The sparktf modules ``mod`` imports anywhere in its code (not for types only)."""
    path, package = MODULES[mod]
    tree = ast.parse(open(path).read())
    typing_only = _type_checking_blocks(tree)
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if package else mod.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            names = [f"{origin}.{a.name}" for a in node.names] + [origin]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            # (a module's own packages: Python runs them first anyway, no arrow)
            if name and name != mod and not mod.startswith(name + "."):
                found.add(name)
    return found


GRAPH = {mod: imports(mod) for mod in MODULES}


def side(mod):
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else None


@pytest.mark.parametrize("lower", sorted(FORBIDDEN))
def test_no_side_imports_a_side_above_it(lower):
    wrong = [
        f"{mod} -> {dep}"
        for mod, deps in GRAPH.items()
        if side(mod) == lower
        for dep in deps
        if side(dep) in FORBIDDEN[lower]
    ]
    assert wrong == [], wrong


def test_no_import_circles():
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert circles == [], circles


#: a package that imports no Spark: the sparktf modules it may never import (besides itself)
PURE = {"sparktf.driver.job": "sparktf.driver"}


def _within(mod, package):
    return mod == package or mod.startswith(package + ".")


def spark_imports(mod):
    """The pyspark modules ``mod`` imports anywhere in its code (not for types only)."""
    path, _ = MODULES[mod]
    tree = ast.parse(open(path).read())
    typing_only = _type_checking_blocks(tree)
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        found.update(name for name in names if _within(name, "pyspark"))
    return found


def reached(mod):
    """The sparktf modules ``mod`` imports, directly or through the ones it imports."""
    seen, todo = set(), [mod]
    while todo:
        for dep in GRAPH[todo.pop()]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


@pytest.mark.parametrize("pure", sorted(PURE))
def test_a_pure_package_imports_no_spark(pure):
    wrong = []
    for mod in sorted(m for m in MODULES if _within(m, pure)):
        for dep in sorted(reached(mod) | {mod}):
            if _within(dep, PURE[pure]) and not _within(dep, pure):
                wrong.append(f"{mod} -> {dep}")
            wrong += [f"{mod} -> {dep} -> {spark}" for spark in sorted(spark_imports(dep))]
    assert wrong == [], wrong


#: What ``sparktf.predict``'s driver half may take of the driver: Spark's facts, the Connect
#: side, the DataFrame's columns as the feed sees them, the configuration checks.
PREDICT_MAY_IMPORT = {
    "sparktf.driver.sparkfacts",
    "sparktf.driver.sparkside",
    "sparktf.driver.partition",
    "sparktf.driver.preflight",
}


def module_level_imports(mod):
    """The sparktf modules ``mod`` imports when it is imported (its top level only)."""
    path, package = MODULES[mod]
    tree = ast.parse(open(path).read())
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module or ""]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != mod:
                found.add(name)
    return found


def test_batch_prediction_takes_of_the_driver_only_its_spark_facts_and_checks():
    wrong = [
        f"{mod} -> {dep}"
        for mod in MODULES
        if _within(mod, "sparktf.batch_prediction")
        for dep in GRAPH[mod]
        if _within(dep, "sparktf.driver") and dep not in PREDICT_MAY_IMPORT | {"sparktf.driver"}
    ]
    assert wrong == [], wrong


def test_what_a_worker_imports_to_score_holds_nothing_of_the_driver():
    """The scorer a Spark Python worker unpickles, and what importing it imports."""
    seen, todo = set(), ["sparktf.batch_prediction.scorer"]
    while todo:
        for dep in module_level_imports(todo.pop()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    assert sorted(m for m in seen if _within(m, "sparktf.driver")) == []


# ------------------------------------------------------------------------- references
ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|exc):`~?(sparktf(?:\.\w+)+)`")
TESTS_PATH = re.compile(r"(?<![\w/.-])(tests/[\w/.-]+\.py)")


def _defined(path, names):
    """Whether ``names`` (attributes, outermost first) are defined in the module at ``path``."""
    body = ast.parse(open(path).read()).body
    for name in names:
        found = None
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name == name:
                    found = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    found = node
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                if any((a.asname or a.name).split(".")[0] == name for a in node.names):
                    found = node
        if found is None:
            return False
        body = getattr(found, "body", [])
    return True


def _exports():
    """``sparktf``'s names, imported on first use: name -> the module that defines it."""
    for node in ast.parse(open(os.path.join(PKG, "__init__.py")).read()).body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_EXPORTS":
            return ast.literal_eval(node.value)
    return {}


EXPORTS = _exports()


def resolves(target):
    parts = target.split(".")
    if len(parts) > 1 and parts[0] == "sparktf" and parts[1] in EXPORTS:  # sparktf.run
        parts = EXPORTS[parts[1]].split(".") + parts[1:]
    for cut in range(len(parts), 0, -1):
        mod = ".".join(parts[:cut])
        if mod in MODULES:
            return _defined(MODULES[mod][0], parts[cut:])
    return False


def _texts():
    for path, _ in MODULES.values():
        yield os.path.relpath(path, ROOT), open(path).read()
    for dirpath, _, files in os.walk(os.path.join(ROOT, "docs")):
        for name in files:
            if name.endswith(".md"):
                path = os.path.join(dirpath, name)
                yield os.path.relpath(path, ROOT), open(path).read()


def test_every_sparktf_reference_resolves():
    broken = [
        f"{where}: {target}"
        for where, text in _texts()
        for target in ROLE.findall(text)
        if not resolves(target)
    ]
    assert broken == [], broken


def test_every_tests_path_exists():
    broken = [
        f"{where}: {path}"
        for where, text in _texts()
        for path in TESTS_PATH.findall(text)
        if not os.path.exists(os.path.join(ROOT, path))
    ]
    assert broken == [], broken


def test_each_module_name_names_one_module():
    """One word per idea: no two modules share a name (``tf1`` for two things, ``outputs`` for
    two); a package's ``__init__`` and ``__main__`` aside."""
    by_name = {}
    for mod, (_, package) in MODULES.items():
        last = mod.rpartition(".")[2]
        if not package and last != "__main__":
            by_name.setdefault(last, []).append(mod)
    assert {n: m for n, m in by_name.items() if len(m) > 1} == {}
