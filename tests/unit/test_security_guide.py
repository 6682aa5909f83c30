"""docs/guides/security.md's table of channels and files names, on each row, the tests that
show it: every one it names exists (a renamed or removed test fails here, not silently)."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUIDE = os.path.join(ROOT, "docs", "guides", "security.md")


def test_every_test_the_security_guide_names_exists():
    text = open(GUIDE).read()
    refs = sorted(set(re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", text)))
    assert len(refs) >= 15
    missing = []
    for path, name in refs:
        full = os.path.join(ROOT, path)
        if not os.path.isfile(full):
            missing.append(path)
        elif name and not re.search(rf"^def {name}\(", open(full).read(), re.M):
            missing.append(f"{path}::{name}")
    assert not missing, f"docs/guides/security.md names tests that do not exist: {missing}"


def test_every_row_of_the_table_names_a_test():
    rows = [
        line
        for line in open(GUIDE)
        if line.startswith("| ") and not line.startswith(("| channel", "| setting"))
    ]
    table = [r for r in rows if r.count("|") == 6]
    assert len(table) >= 12
    assert all("tests/" in r for r in table), [r for r in table if "tests/" not in r]
