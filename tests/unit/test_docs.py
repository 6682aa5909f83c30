"""The docs cannot drift from the code: each generated reference page is what bin/gen_docs.py
makes from the code's tables now, the environment-variable table names exactly the
``SPARKTF_*`` variables the code uses, every page is in the site's nav, and the README's
quickstart is the Getting started page's. No TensorFlow, no Spark session, no mkdocs
(``mkdocs build --strict`` runs in CI)."""

import difflib
import importlib.util
import json
import pathlib
import re
import subprocess
import sys

import pytest

from sparktf.common import envvars

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME = re.compile(r"SPARKTF_[A-Z0-9_]+")


def gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "bin" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", sorted(gen_docs().PAGES))
def test_each_generated_page_is_what_the_code_gives_now(page):
    made = gen_docs().PAGES[page]()
    path = ROOT / page
    committed = path.read_text(encoding="utf-8") if path.exists() else ""
    diff = "".join(
        difflib.unified_diff(
            committed.splitlines(True), made.splitlines(True), page, "from the code"
        )
    )
    assert committed == made, f"{page} is stale: run python3 bin/gen_docs.py\n{diff[:3000]}"


def test_generating_the_pages_imports_no_tensorflow():
    script = (
        "import json, sys; sys.argv = ['gen_docs']; "
        "import runpy; g = runpy.run_path('bin/gen_docs.py'); "
        "[make() for make in g['PAGES'].values()]; "
        "print(json.dumps('tensorflow' in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) is False


def names_in_code():
    """Every SPARKTF_* name in sparktf/, bin/ and conf/, but the table's own module."""
    found = {}
    for folder in ("sparktf", "bin", "conf"):
        for path in sorted((ROOT / folder).rglob("*")):
            if (
                not path.is_file()
                or path.suffix in (".pyc", ".jar")
                or path == ROOT / "sparktf" / "common" / "envvars.py"
            ):
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for name in NAME.findall(text):
                found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def test_the_environment_table_names_exactly_the_variables_the_code_uses():
    in_code = names_in_code()
    in_table = {v.name for v in envvars.TABLE}
    missing = {n: where for n, where in in_code.items() if n not in in_table}
    assert not missing, f"add these to sparktf/common/envvars.py (name: first file): {missing}"
    stale = sorted(in_table - set(in_code))
    assert not stale, f"sparktf/common/envvars.py lists variables no code uses: {stale}"


def test_every_environment_variable_has_a_known_side_and_a_meaning():
    assert len({v.name for v in envvars.TABLE}) == len(envvars.TABLE)
    for v in envvars.TABLE:
        assert v.side in envvars.SIDES, v
        assert v.doc and v.default, v


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    config = (ROOT / "mkdocs.yml").read_text()
    entries = set(re.findall(r":\s+([\w/.-]+\.md)\s*$", config, re.M))
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages - entries == set(), "add these pages to mkdocs.yml's nav"
    assert entries - pages == set(), "mkdocs.yml's nav names pages that do not exist"


def python_block(text, heading):
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_quickstart_is_the_getting_started_code():
    readme = python_block((ROOT / "README.md").read_text(), "Quickstart")
    page = python_block((ROOT / "docs" / "getting-started.md").read_text(), "Your first job")
    assert readme == page, "README.md's quickstart and docs/getting-started.md differ"


def test_the_readme_stays_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines: move detail into docs/"
