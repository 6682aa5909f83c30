"""Directories and files private to the user running the job, made so that another user on the
same host can neither read them nor redirect sparktf's writes into a place of their choosing.

Runs on any side (the driver's node logs use it; it imports nothing of Spark or TensorFlow).

* A directory is created with mode 0700, then checked with ``lstat``: a symlink, something
  that is not a directory, or a directory another uid owns is refused with
  :class:`~sparktf.errors.UnsafePathError`, naming the path and what to do. In a sticky
  directory such as ``/tmp`` nobody else can rename or remove a directory once it is ours, and
  inside a 0700 directory of ours nobody else can create anything, so the check holds.
* A file is opened with ``O_NOFOLLOW | O_CREAT`` and mode 0600: a symlink in its place fails
  the open (``ELOOP``) instead of being followed.
"""

from __future__ import annotations

import os
import stat
from typing import IO

from sparktf.errors import UnsafePathError


def directory(path: str, private: bool = True, remedy: str = "") -> str:
    """``path`` as a directory of this user's: created 0700 if missing (its missing parents
    too), refused if it is a symlink, not a directory, or another user's. ``private`` makes an
    existing one 0700 too (ours: we may). ``remedy`` ends the error's message."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        return directory(path, private, remedy)
    st = os.lstat(path)
    why = None
    if stat.S_ISLNK(st.st_mode):
        why = "is a symlink (to " + repr(os.readlink(path)) + "); sparktf does not follow one"
    elif not stat.S_ISDIR(st.st_mode):
        why = "is not a directory"
    elif st.st_uid != os.getuid():
        why = f"is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if why:
        raise UnsafePathError(f"{path} {why}. {remedy}".strip())
    if private and stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)  # (a directory of ours, made looser by an older sparktf)
    return path


def open_append(path: str) -> IO[str]:
    """``path`` opened to append text, line-buffered: created 0600, never through a symlink
    (``OSError`` ``ELOOP`` then)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError(f"{path} is not a regular file; sparktf writes no other kind")
        return os.fdopen(fd, "a", encoding="utf-8", errors="replace", buffering=1)
    except BaseException:
        os.close(fd)
        raise
