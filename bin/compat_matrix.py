"""The version matrix: one virtual environment per cell (PySpark x TensorFlow + tf-keras x
pyarrow), in which the main job (``spark-submit examples/mnist.py``) and the quick test tier
(``python -m pytest tests/unit -q``) run against this checkout. Called by bin/compat-matrix.sh.

Each cell's venv lives under ~/.cache/sparktf/compat/<cell> (``--cache`` moves the
root) and is built only when missing (``--rebuild`` builds it again). sparktf is installed
into it, editable, before every run: from this checkout as it is, or with ``--commit REV``
from that commit exported (``git archive``) under src/<sha> beside the venvs, so that edits
in progress in the checkout do not count in the table. Each cell's result
is kept as results/<cell>.json beside the venvs, with the full logs under logs/, and the
Markdown table printed at the end covers the cells asked for (or, with ``--table``, the
results already there). Cells run one after another: the machines here have 2 cores.
"""

import argparse
import ast
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "sparktf", "compat")
#: Test runner of the quick tier; not sparktf's [test] extra, whose pyspark[connect]>=4.0
#: would replace a cell's PySpark 3.5.
TEST_TOOLS = ["pytest>=8", "pytest-timeout>=2.3"]


@dataclass(frozen=True)
class Cell:
    name: str
    pyspark: str
    tensorflow: str
    tf_keras: str
    pyarrow: str
    extra: tuple[str, ...] = ()  # further pins the cell needs, said in its note
    note: str = ""
    #: Horovod's version, built from source with TensorFlow and Gloo once the rest is in;
    #: the cell then also runs tests/spark/test_horovod.py (run(framework="horovod")).
    horovod: str | None = None

    def pins(self) -> list[str]:
        return [
            f"pyspark=={self.pyspark}",
            f"tensorflow=={self.tensorflow}",
            f"tf-keras=={self.tf_keras}",
            f"pyarrow=={self.pyarrow}",
            *self.extra,
        ]


NEWEST = {"pyspark": "4.3.0", "tensorflow": "2.21.0", "tf_keras": "2.21.0", "pyarrow": "26.0.1"}

#: Each axis at its oldest with the others newest, the newest of all, and the oldest of all.
CELLS = [
    Cell("newest", **NEWEST, note="what a fresh pip install gets"),
    Cell("pyspark-4.0", **{**NEWEST, "pyspark": "4.0.5"}),
    Cell("pyspark-3.5", **{**NEWEST, "pyspark": "3.5.8"}),
    Cell("tf-2.18", **{**NEWEST, "tensorflow": "2.18.1", "tf_keras": "2.18.0"}),
    Cell(
        "tf-2.16",
        **{**NEWEST, "tensorflow": "2.16.2", "tf_keras": "2.16.0", "pyarrow": "18.1.0"},
        note="TensorFlow 2.16 pins numpy < 2; pyarrow >= 21 needs numpy 2: pyarrow 18.1",
    ),
    Cell(
        "pyarrow-18",
        **{**NEWEST, "pyarrow": "18.1.0"},
        extra=("numpy<2",),
        note="PySpark 4.3 needs pyarrow >= 18; sparktf RecordBatch.append_column (>= 16)",
    ),
    Cell(
        "horovod",
        **{**NEWEST, "tensorflow": "2.18.1", "tf_keras": "2.18.0"},
        horovod="0.28.1",
        note="Horovod 0.28.1 builds against TensorFlow 2.16 to 2.18 (g++, cmake)",
    ),
    Cell(
        "oldest",
        pyspark="4.0.5",
        tensorflow="2.16.2",
        tf_keras="2.16.0",
        pyarrow="18.1.0",
        extra=("numpy<2",),
        note="every axis at its oldest supported version",
    ),
]
BY_NAME = {c.name: c for c in CELLS}


def venv_dir(cell: Cell) -> str:
    return os.path.join(CACHE, cell.name)


def run_logged(cmd, log_path, timeout, env=None, cwd=ROOT):
    """Runs cmd with its output in log_path: (exit code or 'timeout', seconds, output)."""
    started = time.monotonic()
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        try:
            proc = subprocess.run(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, timeout=timeout
            )
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    with open(log_path, errors="replace") as log:
        return code, time.monotonic() - started, log.read()


#: A Python exception's line, a Java one's, pip's, or spark-submit's.
_ERROR = re.compile(
    r"^\s*((\w+\.)*\w*(Error|Exception|Exit)\b.*|ERROR: .*|error: .*|Exception in thread .*)$"
)


def first_error(output: str) -> str:
    """The first line of output that reads as an error, else its last non-empty line."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    for line in lines:
        if _ERROR.match(line) and "WARN" not in line:
            return line.strip()[:240]
    return lines[-1].strip()[:240] if lines else "(no output)"


def build(cell: Cell, rebuild: bool, logs: str, src: str) -> tuple[bool, str]:
    """Makes the cell's venv unless it is there: (ok, what failed)."""
    path = venv_dir(cell)
    marker = os.path.join(path, ".sparktf-compat-installed")
    if os.path.exists(marker) and not rebuild:
        return True, ""
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", path], check=True)
    py = os.path.join(path, "bin", "python")
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check"]
    # sparktf's own bounds are what this matrix tests: its other requirements as setup.py
    # says, the cell's pins in place of setup.py's for the packages they name.
    pinned = {re.split(r"[=<>!~ ]", p, maxsplit=1)[0] for p in cell.pins()}
    rest = [
        r for r in install_requires(src) if re.split(r"[=<>!~ \[]", r, maxsplit=1)[0] not in pinned
    ]
    started = time.monotonic()
    code, _, out = run_logged(pip + cell.pins() + rest + TEST_TOOLS, f"{logs}/install.log", 3600)
    if code != 0:
        return False, f"install failed ({code}): {first_error(out)}"
    if cell.horovod:
        ok, why = build_horovod(cell.horovod, py, logs)
        if not ok:
            return False, why
    secs = time.monotonic() - started
    with open(marker, "w") as f:
        f.write(f"{secs:.0f} s\n")
    return True, ""


#: Horovod's build: its TensorFlow ops and Gloo, no MPI, no other framework (what
#: run(framework="horovod") needs), one compile at a time on these 2-core machines.
HOROVOD_BUILD = {
    "HOROVOD_WITH_TENSORFLOW": "1",
    "HOROVOD_WITH_GLOO": "1",
    "HOROVOD_WITHOUT_MPI": "1",
    "HOROVOD_WITHOUT_PYTORCH": "1",
    "HOROVOD_WITHOUT_MXNET": "1",
    "MAKEFLAGS": "-j1",
}


def build_horovod(version: str, py: str, logs: str) -> tuple[bool, str]:
    """Horovod ``version`` built from its sdist against the venv's TensorFlow, then imported:
    (ok, what failed)."""
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check"]
    code, _, out = run_logged(pip + ["pyyaml", "packaging"], f"{logs}/horovod-deps.log", 600)
    if code == 0:
        code, _, out = run_logged(
            pip
            + ["--no-build-isolation", "--no-deps", "--no-cache-dir", "-v"]
            + [f"horovod=={version}"],
            f"{logs}/horovod-build.log",
            3600,
            env={**os.environ, **HOROVOD_BUILD},
        )
    if code != 0:
        return False, f"horovod build failed ({code}): {first_error(out)}"
    check = "import horovod.tensorflow as h; assert h.gloo_built(), 'no Gloo'"
    code, _, out = run_logged([py, "-c", check], f"{logs}/horovod-import.log", 300)
    if code != 0:
        return False, f"horovod import failed ({code}): {first_error(out)}"
    return True, ""


def install_requires(src: str) -> list[str]:
    """setup.py's install_requires, read without running it."""
    with open(os.path.join(src, "setup.py")) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "install_requires":
            return list(ast.literal_eval(node.value))
    raise SystemExit("setup.py has no install_requires")


def versions(py: str) -> dict:
    """What the venv really has, by the packages' own metadata."""
    code = (
        "import importlib.metadata as m, json\n"
        "names = ['pyspark', 'tensorflow', 'tf-keras', 'keras', 'pyarrow', 'numpy', 'pandas', 'horovod']\n"
        "out = {}\n"
        "for n in names:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([py, "-c", code], capture_output=True, text=True)
    return json.loads(proc.stdout) if proc.returncode == 0 else {}


def cell_env(path: str) -> dict:
    """The environment of a job in the venv: its Python on driver and executors, its Spark."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    py = os.path.join(path, "bin", "python")
    spark_home = subprocess.run(
        [py, "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    env.update(
        VIRTUAL_ENV=path,
        PATH=os.path.join(path, "bin") + os.pathsep + env.get("PATH", ""),
        PYSPARK_PYTHON=py,
        PYSPARK_DRIVER_PYTHON=py,
        SPARK_HOME=spark_home,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    return env


def unit_summary(output: str) -> str:
    """pytest's last line (``412 passed in 61.2s``), and the first failure if any."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    summary = next((line.strip("= ") for line in reversed(lines) if " in " in line), "")
    failed = next((line for line in lines if line.startswith(("FAILED ", "ERROR "))), "")
    return f"{summary}; {failed[:200]}" if failed else summary or first_error(output)


@dataclass
class Result:
    cell: str
    pins: list
    versions: dict
    result: str  # pass / fail
    error: str
    job_secs: float | None
    test_accuracy: float | None
    unit: str
    unit_ok: bool
    note: str
    date: str
    machine: str
    source: str = ""


def machine() -> str:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{os.cpu_count()} cores ({cpu or platform.machine()}), {mem:.0f} GiB, "
        f"Python {platform.python_version()}, {java_version()}"
    )


def java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
        return out.splitlines()[0].replace('"', "")
    except (OSError, IndexError):
        return "no java"


def source(commit: str | None) -> tuple[str, str]:
    """The tree to test and its label: the checkout as it is, or a commit exported."""
    if commit is None:
        head = git("rev-parse", "--short", "HEAD")
        dirty = " + uncommitted edits" if git("status", "--porcelain", "--", "sparktf") else ""
        return ROOT, f"checkout at {head}{dirty}"
    sha = git("rev-parse", "--short", commit)
    path = os.path.join(CACHE, "src", sha)
    if not os.path.exists(os.path.join(path, "setup.py")):
        os.makedirs(path, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", ROOT, "archive", sha], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", path], input=archive, check=True)
    return path, f"commit {sha}"


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", ROOT, *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def run_cell(cell: Cell, rebuild: bool, job_timeout: int, src: str, label: str) -> Result:
    logs = os.path.join(CACHE, "logs", cell.name)
    os.makedirs(logs, exist_ok=True)
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    res = Result(
        cell.name, cell.pins(), {}, "fail", "", None, None, "not run", False, cell.note, now, ""
    )
    res.machine, res.source = machine(), label
    ok, why = build(cell, rebuild, logs, src)
    if not ok:
        res.error = why
        return res
    path = venv_dir(cell)
    py = os.path.join(path, "bin", "python")
    # sparktf itself, editable, from the tree under test (seconds; the venv may have another)
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "--no-deps", "-e", src]
    code, _, out = run_logged(pip, f"{logs}/install-sparktf.log", 600)
    if code != 0:
        res.error = f"sparktf install failed ({code}): {first_error(out)}"
        return res
    res.versions = versions(py)
    env = cell_env(path)

    spark_submit = os.path.join(path, "bin", "spark-submit")
    code, secs, out = run_logged(
        [spark_submit, "examples/mnist.py"], f"{logs}/mnist.log", job_timeout, env, src
    )
    accuracy = re.findall(r"^test_accuracy=([0-9.]+)\s*$", out, re.M)
    res.job_secs = round(secs, 1)
    res.test_accuracy = float(accuracy[-1]) if accuracy else None
    if code == 0 and accuracy:
        res.result = "pass"
    else:
        res.error = f"main job exit {code}: {first_error(out)}"

    tests = ["tests/unit"] + (["tests/spark/test_horovod.py"] if cell.horovod else [])
    code, _, out = run_logged(
        [py, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider"],
        f"{logs}/unit.log",
        job_timeout,
        env,
        src,
    )
    res.unit_ok = code == 0
    res.unit = unit_summary(out) if code != "timeout" else f"timed out after {job_timeout} s"
    if not res.unit_ok:
        res.result = "fail"
    return res


def results_path(name: str) -> str:
    return os.path.join(CACHE, "results", f"{name}.json")


def save(res: Result) -> None:
    os.makedirs(os.path.dirname(results_path(res.cell)), exist_ok=True)
    with open(results_path(res.cell), "w") as f:
        json.dump(asdict(res), f, indent=1)


def load(name: str) -> dict | None:
    try:
        with open(results_path(name)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def table(results: list[dict]) -> str:
    """The Markdown table of results, one row per cell."""
    rows = [
        "| cell | PySpark | TensorFlow / tf-keras | pyarrow | numpy | result | main job | "
        "test_accuracy | unit tier |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        v = r["versions"] or {}
        pins = dict(p.split("==", 1) for p in r["pins"] if "==" in p)
        result = "**pass**" if r["result"] == "pass" else f"fail: `{r['error']}`"
        if r["result"] != "pass" and not r["error"]:
            result = "fail (unit tier)"
        secs = f"{r['job_secs']:.1f} s" if r["job_secs"] is not None else "-"
        acc = f"{r['test_accuracy']:.4f}" if r["test_accuracy"] is not None else "-"
        unit = r["unit"].replace("|", "\\|")
        rows.append(
            f"| {r['cell']} | {v.get('pyspark', pins.get('pyspark'))} "
            f"| {v.get('tensorflow', pins.get('tensorflow'))} / "
            f"{v.get('tf-keras', pins.get('tf-keras'))} "
            f"| {v.get('pyarrow', pins.get('pyarrow'))} | {v.get('numpy', '-')} "
            f"| {result} | {secs} | {acc} | {unit} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    global CACHE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cells", nargs="*", help="cells to run (default: all); see --list")
    parser.add_argument("--list", action="store_true", help="print the cells and their pins")
    parser.add_argument("--table", action="store_true", help="print the saved results only")
    parser.add_argument("--rebuild", action="store_true", help="build the venvs again")
    parser.add_argument("--timeout", type=int, default=1200, help="per command, seconds")
    parser.add_argument("--commit", help="test this commit (git archive), not the checkout")
    parser.add_argument("--cache", default=CACHE, help=f"venvs and results (default {CACHE})")
    args = parser.parse_args(argv)
    CACHE = args.cache
    if args.list:
        for c in CELLS:
            print(f"{c.name:12} {' '.join(c.pins())}" + (f"  ({c.note})" if c.note else ""))
        return 0
    unknown = [n for n in args.cells if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown cells {unknown}: choose among {sorted(BY_NAME)}")
    names = args.cells or [c.name for c in CELLS]
    if args.table:
        found = [r for r in map(load, names) if r]
        print(table(found))
        return 0
    src, label = source(args.commit)
    print(f"compat-matrix: testing the {label} ({src})", file=sys.stderr, flush=True)
    done = []
    for name in names:
        print(f"compat-matrix: {name} ...", file=sys.stderr, flush=True)
        res = run_cell(BY_NAME[name], args.rebuild, args.timeout, src, label)
        save(res)
        done.append(asdict(res))
        print(f"compat-matrix: {name}: {res.result} {res.error}", file=sys.stderr, flush=True)
    print(table(done))
    return 0 if all(r["result"] == "pass" for r in done) else 1


if __name__ == "__main__":
    sys.exit(main())
