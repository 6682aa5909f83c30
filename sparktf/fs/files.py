"""The file calls (exists, list, read, write, rename, upload, download) on local or Hadoop paths,
writes atomic by a rename from a temporary name.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator

from sparktf.errors import ConfigError
from sparktf.fs.backends import _Backend, _call, _cause, _resolve, backend
from sparktf.fs.paths import _TMP_MARK, HadoopFSError, _fspath, _local, _split, is_hadoop


# --------------------------------------------------------------------- the public calls
def exists(path: str) -> bool:
    path = _fspath(path)
    if not is_hadoop(path):
        return os.path.exists(_local(path))
    b, p = _resolve(path)
    return _call(path, "status", b.info, p)[0] is not None


def stat(path: str) -> tuple[str, int, int] | None:
    """(``"file"`` or ``"dir"``, size in bytes, modification time in nanoseconds) of ``path``,
    or None if nothing is there. HDFS keeps modification times in milliseconds (WebHDFS gives
    them so); libhdfs gives whole seconds."""
    path = _fspath(path)
    if not is_hadoop(path):
        try:
            st = os.stat(_local(path))
        except (FileNotFoundError, NotADirectoryError):  # (as os.path.exists says False)
            return None
        kind = "dir" if os.path.isdir(_local(path)) else "file"
        return kind, st.st_size, st.st_mtime_ns
    b, p = _resolve(path)
    return _call(path, "status", b.stat, p)


def isdir(path: str) -> bool:
    path = _fspath(path)
    if not is_hadoop(path):
        return os.path.isdir(_local(path))
    b, p = _resolve(path)
    return _call(path, "status", b.info, p)[0] == "dir"


def listdir(path: str) -> list[str]:
    """Names in the directory ``path``, sorted."""
    path = _fspath(path)
    if not is_hadoop(path):
        return sorted(os.listdir(_local(path)))
    return [name for name, _, _ in _scan(path)]


def _scan(path: str) -> list[tuple[str, str | None, int]]:
    """(name, kind, size) of each entry of the Hadoop directory ``path``."""
    b, p = _resolve(path)
    kind, _ = _call(path, "status", b.info, p)
    if kind is None:
        raise HadoopFSError(f"{path}: list failed: no such file or directory")
    if kind == "file":
        raise HadoopFSError(f"{path}: list failed: a file, not a directory")
    return _call(path, "list", b.scan, p)


def list_files(path: str) -> list[str]:
    """Every file under the directory ``path`` (recursively), as full paths, sorted; hidden
    and underscore names (``_SUCCESS``, ``.crc``) and files in flight are left out."""
    path = _fspath(path)
    skip = (".", "_")
    if not is_hadoop(path):
        root = _local(path)
        out = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith(skip)]
            out += [
                os.path.join(d, f) for f in files if not f.startswith(skip) and _TMP_MARK not in f
            ]
        return sorted(out)
    out = []
    for name, kind, _ in _scan(path):
        if name.startswith(skip) or _TMP_MARK in name:
            continue
        child = path.rstrip("/") + "/" + name
        out += list_files(child) if kind == "dir" else [child]
    return sorted(out)


def makedirs(path: str) -> None:
    path = _fspath(path)
    if not is_hadoop(path):
        os.makedirs(_local(path), exist_ok=True)
        return
    b, p = _resolve(path)
    _call(path, "mkdir", b.makedirs, p)


def delete(path: str, recursive: bool = False) -> None:
    """Remove a file, or a directory (with ``recursive`` when it is not empty); nothing if
    it does not exist."""
    path = _fspath(path)
    if not is_hadoop(path):
        p = _local(path)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p) if recursive else os.rmdir(p)
        elif os.path.lexists(p):
            os.unlink(p)
        return
    b, p = _resolve(path)
    _call(path, "delete", b.delete, p, recursive)


def rename(src: str, dst: str) -> None:
    src, dst = _fspath(src, "src"), _fspath(dst, "dst")
    if not is_hadoop(src):
        os.rename(_local(src), _local(dst))
        return
    b = backend(src)
    _call(src, f"rename to {dst}", b.rename, _split(src)[3], _split(dst)[3])


@contextlib.contextmanager
def open(path: str, mode: str = "rb") -> Iterator:
    """A binary file: ``rb`` streams it; ``wb`` writes a local temporary file and puts it in
    place atomically when the block ends without an error."""
    path = _fspath(path)
    if mode not in ("rb", "wb"):
        raise ConfigError(f"sparktf.fs.open supports 'rb' and 'wb', not {mode!r}")
    if not is_hadoop(path):
        if mode == "rb":
            with builtins.open(_local(path), "rb") as f:
                yield f
        else:
            with _atomic_local_file(_local(path)) as f:
                yield f
        return
    b, p = _resolve(path)
    if mode == "rb":
        kind, _ = _call(path, "status", b.info, p)
        if kind == "dir":
            raise HadoopFSError(f"{path}: open failed: a directory, not a file")
        # (libhdfs reports a file it may not see as missing: the open says which it is)
        f = _call(path, "open", b.open_read, p)
        try:
            yield f
        except Exception as exc:
            if isinstance(exc, OSError) and not isinstance(exc, HadoopFSError):
                raise HadoopFSError(f"{path}: read failed ({_cause(exc)})") from exc
            raise
        finally:
            f.close()
        return
    with tempfile.TemporaryFile() as tmp:
        yield tmp
        tmp.seek(0)
        _put_file(path, tmp)


@contextlib.contextmanager
def _atomic_local_file(path: str):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + _TMP_MARK, dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _sibling_tmp(path: str, suffix: str | None = None) -> str:
    return path.rstrip("/") + (suffix or _TMP_MARK + uuid.uuid4().hex[:12])


def _swap_in(path: str, tmp: str, target: str, exists, rename, remove) -> None:
    """Rename ``tmp`` to ``target`` (of ``path``), replacing what is there, and never lose
    both: the old one is renamed aside (under a temporary name, which listings skip), the new
    one in, and only then is the old one removed; if the new one cannot be renamed in, the
    old one is renamed back and the rename's error raised."""
    if not exists(target):
        rename(tmp, target)
        return
    suffix = _TMP_MARK + "old_" + uuid.uuid4().hex[:12]
    aside = _sibling_tmp(target, suffix)
    rename(target, aside)
    try:
        rename(tmp, target)
    except BaseException as exc:
        try:
            rename(aside, target)
        except BaseException:
            kept = _sibling_tmp(path, suffix)
            raise HadoopFSError(
                f"{path}: the new version could not be renamed into place ({_cause(exc)}), "
                f"nor could what was there be put back: what was there is kept at {kept}; "
                f"rename it to {path} to restore it"
            ) from exc
        raise
    with contextlib.suppress(Exception):  # (a leftover is skipped by listings)
        remove(aside)


def _remove_local(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _put_atomically(path: str, write) -> None:
    """``write(backend, tmp)`` under a temporary name beside ``path``, then rename that into
    place, replacing what was there (:func:`_swap_in`); the temporary is removed if anything
    fails."""
    b, p = _resolve(path)
    tmp = _sibling_tmp(p)
    _call(path, "mkdir", b.makedirs, os.path.dirname(p.rstrip("/")) or "/")
    try:
        write(b, tmp)
        _swap_in(
            path,
            tmp,
            p,
            exists=lambda x: _call(path, "status", b.info, x)[0] is not None,
            rename=lambda src, dst: _call(path, "rename", b.rename, src, dst),
            remove=lambda x: b.delete(x, True),
        )
    except BaseException:
        with contextlib.suppress(Exception):
            b.delete(tmp, True)
        raise


def _put_file(path: str, f) -> None:
    """Write the readable file ``f`` to ``path``, atomically."""
    _put_atomically(path, lambda b, tmp: _call(path, "write", b.write_from, tmp, f))


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def upload(local: str, remote: str) -> None:
    """Copy a local file or directory to ``remote`` (local or Hadoop), replacing what is there,
    atomically: it is written under a temporary name beside ``remote`` and renamed."""
    local, remote = _local(_fspath(local, "local")), _fspath(remote, "remote")
    if not os.path.exists(local):
        raise HadoopFSError(f"{local}: upload failed: no such file or directory")
    if not is_hadoop(remote):
        _upload_local(local, remote)
        return
    if not os.path.isdir(local):
        with builtins.open(local, "rb") as f:
            _put_file(remote, f)
        return
    _put_atomically(remote, lambda b, tmp: _upload_tree(b, remote, local, tmp))


def _upload_local(local: str, remote: str) -> None:
    target = _local(remote)
    tmp = _sibling_tmp(target)
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    try:
        (shutil.copytree if os.path.isdir(local) else shutil.copy2)(local, tmp)
        if os.path.isdir(tmp) or (os.path.isdir(target) and not os.path.islink(target)):
            _swap_in(
                remote, tmp, target, exists=os.path.lexists, rename=os.rename, remove=_remove_local
            )
        else:
            os.replace(tmp, target)  # a file over a file (or nothing): one atomic rename
    except BaseException:
        with contextlib.suppress(OSError):
            _remove_local(tmp)
        raise


def _upload_tree(b: _Backend, remote: str, local: str, target: str) -> None:
    _call(remote, "mkdir", b.makedirs, target)
    for name in sorted(os.listdir(local)):
        src, dst = os.path.join(local, name), target.rstrip("/") + "/" + name
        if os.path.isdir(src):
            _upload_tree(b, remote, src, dst)
        else:
            with builtins.open(src, "rb") as f:
                _call(remote, "write", b.write_from, dst, f)


def download(remote: str, local: str) -> None:
    """Copy a file or directory at ``remote`` to the local path ``local`` (replacing it)."""
    remote, local = _fspath(remote, "remote"), _local(_fspath(local, "local"))
    if not is_hadoop(remote):
        src = _local(remote)
        if os.path.isdir(src):
            shutil.copytree(src, local, dirs_exist_ok=True)
        else:
            shutil.copy2(src, local)
        return
    b, p = _resolve(remote)
    kind, _ = _call(remote, "status", b.info, p)
    if kind is None:
        raise HadoopFSError(f"{remote}: download failed: no such file or directory")
    if kind == "file":
        _download_file(b, remote, p, local)
        return
    for name, _, _ in _call(remote, "list", b.scan, p):
        download(remote.rstrip("/") + "/" + name, os.path.join(local, name))
    os.makedirs(local, exist_ok=True)


def _download_file(b: _Backend, remote: str, p: str, local: str) -> None:
    with _atomic_local_file(local) as out:
        f = _call(remote, "open", b.open_read, p)
        try:
            shutil.copyfileobj(f, out, 4 << 20)
        except OSError as exc:
            raise HadoopFSError(f"{remote}: read failed ({_cause(exc)})") from exc
        finally:
            f.close()
