"""Reading the files a user names (a plan, kubeconfigs, secret files, evidence packs and
public keys) safely.

A path given is input like any other: it may name a FIFO (an open for reading
blocks until a writer comes, which may be never), ``/dev/zero`` (endless), or a
huge file. So the file is opened non-blocking, checked to be a regular file on
the open descriptor (no race with a rename), and read up to a limit.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = ["FileRefusedError", "open_regular_file", "read_regular_file"]

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


class FileRefusedError(OSError):
    """The path names something that is not a small regular file; ``reason`` says what."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _open_flags() -> int:
    # O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting.
    # O_NOCTTY: opening a terminal device must not make it our controlling terminal.
    return os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@contextmanager
def open_regular_file(path: Path, limit: int) -> Iterator[BinaryIO]:
    """The regular file at ``path``, open for (blocking) binary reads, if it holds at most
    ``limit`` bytes; for a file read in pieces, as a zip is.

    Raises :class:`FileRefusedError` for anything else (FIFO, device, socket, directory,
    a file over ``limit``), and the usual ``OSError`` subclasses (FileNotFoundError,
    PermissionError...) when it cannot be opened. Never blocks on a special file.
    """
    if "\0" in str(path):
        raise FileRefusedError(path, "the path contains a NUL character")
    try:
        fd = os.open(path, _open_flags())
    except IsADirectoryError:
        raise FileRefusedError(path, "is a directory, not a file") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefusedError(path, f"is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise FileRefusedError(path, f"is larger than {_size(limit)}")
        os.set_blocking(fd, True)  # a regular file: blocking reads are the normal kind
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as stream:
        yield stream


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them; refused as
    :func:`open_regular_file` refuses."""
    chunks = []
    with open_regular_file(path, limit) as stream:
        remaining = limit + 1  # one byte more: a file that grew since fstat is caught too
        while remaining > 0:
            chunk = stream.read(min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise FileRefusedError(path, f"is larger than {_size(limit)}")
    return data


def _size(limit: int) -> str:
    if limit % (1 << 20) == 0:
        return f"{limit >> 20} MiB"
    if limit % (1 << 10) == 0:
        return f"{limit >> 10} KiB"
    return f"{limit} bytes"
