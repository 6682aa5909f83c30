"""The Python environment of docs/yarn.md section 3, built as that recipe builds it and cached.

    python3 tests/yarn/env_archive.py      # build (or find) it; prints the archive's path

What docs/yarn.md tells a user to run, on a snapshot of this checkout's ``setup.py``,
``README.md`` and ``sparktf/`` (so that nothing is built inside the working tree)::

    python3 -m pip freeze --exclude-editable > constraints.txt   # the driver's versions
    python3 -m venv sparktf_env
    sparktf_env/bin/pip install -c constraints.txt . venv-pack
    sparktf_env/bin/venv-pack -p sparktf_env -o sparktf_env.tar.gz --compress-level 1 \
        --exclude '*/site-packages/tensorflow/include/*' --exclude '*/site-packages/pyspark/jars/*'

The venv is 3.2 GB (the archive 0.9 GB) and takes minutes to build and pack, so both are
cached under ``~/.cache/sparktf/yarn-env`` (``$SPARKTF_YARN_ENV_CACHE``):

- the venv, keyed by what its dependencies are (setup.py, the constraints, Python's version):
  when only sparktf's sources changed, sparktf alone is installed again into it
  (``pip install --no-deps --force-reinstall .``), which leaves what the recipe would have built;
- the archive, keyed by that, a hash of every file under sparktf/ and venv-pack's options.

Older entries are removed when a new one is made (each is 1-3 GB). A lock file keeps two
sessions from building at once.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: venv-pack's gzip level: 1 packs 3.2 GB in about a third of the default 4's time, for an
#: archive a few percent larger (docs/yarn.md, measured)
COMPRESS_LEVEL = 1
ARCHIVE = "sparktf_env.tar.gz"
#: What the containers never use: TensorFlow's C++ headers (for building custom ops; 430 MB
#: in 25,000 files) and pyspark's jars (a container's JVM is YARN's Spark, and its Python
#: workers import the pyspark.zip Spark ships with every application; 460 MB)
EXCLUDE = ("*/site-packages/tensorflow/include/*", "*/site-packages/pyspark/jars/*")


def cache_dir() -> str:
    return os.environ.get("SPARKTF_YARN_ENV_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sparktf", "yarn-env"
    )


def log(msg: str) -> None:
    print(f"env_archive: {msg}", file=sys.stderr, flush=True)


def constraints() -> str:
    """``pip freeze --exclude-editable`` of this Python: the archive gets the driver's
    versions (pyspark's above all: the driver and its Python workers must match)."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return "".join(
        line + "\n"
        for line in sorted(out.splitlines())
        if line.strip() and " @ " not in line and not line.startswith("-")
    )


def _sources() -> list[str]:
    return sorted(
        p
        for p in glob.glob(os.path.join(ROOT, "sparktf", "**", "*"), recursive=True)
        if os.path.isfile(p) and "__pycache__" not in p
    )


def keys(pins: str) -> tuple[str, str]:
    """(the venv's key, the archive's key)."""
    deps = hashlib.sha256()
    deps.update(f"{sys.version_info[:3]}\n".encode())
    deps.update(open(os.path.join(ROOT, "setup.py"), "rb").read())
    deps.update(pins.encode())
    full = hashlib.sha256(deps.hexdigest().encode())
    full.update(f"compress-level {COMPRESS_LEVEL} exclude {EXCLUDE}\n".encode())
    for path in _sources():
        full.update(os.path.relpath(path, ROOT).encode() + b"\0")
        full.update(open(path, "rb").read())
    return deps.hexdigest()[:16], full.hexdigest()[:16]


def _snapshot(dest: str) -> str:
    """setup.py, README.md and sparktf/ as they are now, where pip may build."""
    src = os.path.join(dest, "sparktf-src")
    os.makedirs(src)
    for name in ("setup.py", "README.md"):
        shutil.copy2(os.path.join(ROOT, name), src)
    shutil.copytree(
        os.path.join(ROOT, "sparktf"),
        os.path.join(src, "sparktf"),
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return src


def _run(cmd: list[str], cwd: str) -> None:
    started = time.monotonic()
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(
            f"{' '.join(cmd)} failed ({out.returncode}):\n"
            f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        )
    log(f"{os.path.basename(cmd[0])} {' '.join(cmd[1:3])}... {time.monotonic() - started:.0f}s")


def _prune(cache: str, keep: set[str]) -> None:
    for path in glob.glob(os.path.join(cache, "venv-*")) + glob.glob(
        os.path.join(cache, "sparktf_env-*.tar.gz")
    ):
        if os.path.basename(path) not in keep:
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.unlink(path)


def build() -> str:
    """The archive's path, built (as the recipe does) unless the cache has it."""
    cache = cache_dir()
    os.makedirs(cache, exist_ok=True)
    pins = constraints()
    venv_key, key = keys(pins)
    archive = os.path.join(cache, f"sparktf_env-{key}.tar.gz")
    with open(os.path.join(cache, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(archive):
            return archive
        venv = os.path.join(cache, f"venv-{venv_key}")
        with tempfile.TemporaryDirectory(prefix="sparktf-env-") as tmp:
            src = _snapshot(tmp)
            pip = os.path.join(venv, "bin", "pip")
            if os.path.exists(os.path.join(venv, "bin", "venv-pack")):
                _run(
                    [pip, "install", "--no-deps", "--force-reinstall", "--no-cache-dir", "."],
                    cwd=src,
                )
            else:
                shutil.rmtree(venv, ignore_errors=True)
                with open(os.path.join(tmp, "constraints.txt"), "w") as f:
                    f.write(pins)
                _run([sys.executable, "-m", "venv", venv], cwd=src)
                _run(
                    [
                        pip,
                        "install",
                        "-q",
                        "-c",
                        os.path.join(tmp, "constraints.txt"),
                        ".",
                        "venv-pack",
                    ],
                    cwd=src,
                )
            partial = archive + ".partial"
            _run(
                [
                    os.path.join(venv, "bin", "venv-pack"),
                    "-p",
                    venv,
                    "-o",
                    partial,
                    "--format",
                    "tar.gz",
                    "--compress-level",
                    str(COMPRESS_LEVEL),
                    "--force",
                    "--quiet",
                    *[a for p in EXCLUDE for a in ("--exclude", p)],
                ],
                cwd=tmp,
            )
            os.replace(partial, archive)
        _prune(cache, {os.path.basename(venv), os.path.basename(archive)})
        log(f"{archive}: {os.path.getsize(archive) / 1e9:.2f} GB")
        return archive


if __name__ == "__main__":
    print(build())
