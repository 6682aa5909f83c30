"""Each package says what it holds: its ``__init__`` docstring has a ``Modules:`` section
naming exactly the modules and subpackages in its directory, each with a line of what it is;
and docs/architecture.md names every package. Read by AST and as text: nothing is imported."""

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "sparktf")
PACKAGES = sorted(d for d, _, files in os.walk(PKG) if "__init__.py" in files)
ENTRY = re.compile(r"^- ``([\w/]+)``: (\S.*)$")


def _listing(package):
    doc = ast.get_docstring(ast.parse(open(os.path.join(package, "__init__.py")).read())) or ""
    _, found, section = doc.partition("\nModules:\n")
    assert found, f"{package}/__init__.py has no Modules: section"
    entries = {}
    for line in section.strip().splitlines():
        m = ENTRY.match(line)
        assert m, f"{package}/__init__.py: {line!r} is not '- ``name``: what it holds'"
        entries[m.group(1)] = m.group(2)
    return entries


def _contents(package):
    names = set()
    for name in os.listdir(package):
        path = os.path.join(package, name)
        if name.endswith(".py") and name != "__init__.py":
            names.add(name[:-3])
        elif os.path.isfile(os.path.join(path, "__init__.py")):
            names.add(name + "/")
    return names


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_a_package_lists_exactly_its_modules(package):
    entries = _listing(package)
    assert set(entries) == _contents(package)
    assert all(len(what) > 10 for what in entries.values()), entries


def test_the_architecture_page_names_every_package():
    page = open(os.path.join(ROOT, "docs", "architecture.md")).read()
    names = [os.path.relpath(p, ROOT).replace(os.sep, ".") for p in PACKAGES]
    assert [n for n in names if f"`{n}`" not in page] == []
