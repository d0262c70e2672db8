"""Reading the files a user names (a plan, kubeconfigs, secret files, evidence packs and
public keys) safely.

A path given is input like any other: it may name a FIFO (an open for reading
blocks until a writer comes, which may be never), ``/dev/zero`` (endless), a huge
file, or a kernel interface under ``/proc`` or ``/sys`` that looks like a regular
file and blocks on read (``/proc/kmsg`` waits for the next kernel message). So
kernel file systems are refused by path and by device, the file is opened
non-blocking, checked to be a regular file on the open descriptor (no race with a
rename), read up to a limit, and a whole read has a deadline.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TypeVar

__all__ = ["FileRefusedError", "call_within", "open_regular_file", "read_regular_file"]

T = TypeVar("T")

# A plan, a kubeconfig or a secret file is a few kilobytes on a local disk: read in
# milliseconds. Longer is a file that blocks (a kernel interface, a hung network mount).
READ_DEADLINE_S = 5.0
# Kernel interfaces, not files: their "files" block, never end, or change as read.
KERNEL_FILE_SYSTEMS = ("/proc", "/sys")

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


def read_regular_file(path: Path, limit: int, deadline_s: float = READ_DEADLINE_S) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    Raises :class:`FileRefusedError` for anything else (FIFO, device, socket, directory,
    a file under /proc or /sys, a file over ``limit``, a read not done in ``deadline_s``),
    and the usual ``OSError`` subclasses (FileNotFoundError, PermissionError...) when it
    cannot be opened. Never blocks for longer than ``deadline_s``.
    """
    if "\0" in str(path):
        raise FileRefusedError(path, "the path contains a NUL character")
    _refuse_kernel_path(path)
    try:
        return call_within(deadline_s, lambda: _read(path, limit), f"read {path}")
    except TimeoutError:
        raise FileRefusedError(
            path, f"is still being read after {deadline_s:g}s: a file whose read blocks"
        ) from None


def _read(path: Path, limit: int) -> bytes:
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


@contextmanager
def open_regular_file(path: Path, limit: int) -> Iterator[BinaryIO]:
    """The regular file at ``path``, open for (blocking) binary reads, if it holds at most
    ``limit`` bytes; for a file read in pieces, as a zip is.

    Raises :class:`FileRefusedError` for anything else (FIFO, device, socket, directory,
    a file under /proc or /sys, a file over ``limit``), and the usual ``OSError``
    subclasses (FileNotFoundError, PermissionError...) when it cannot be opened. Never
    blocks on a special file.
    """
    if "\0" in str(path):
        raise FileRefusedError(path, "the path contains a NUL character")
    _refuse_kernel_path(path)
    try:
        fd = os.open(path, _open_flags())
    except IsADirectoryError:
        raise FileRefusedError(path, "is a directory, not a file") from None
    try:
        info = os.fstat(fd)
        if info.st_dev in _kernel_devices():  # reached by a path that hid it (a bind mount)
            raise FileRefusedError(path, _KERNEL_REASON)
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


_KERNEL_REASON = "is under /proc or /sys: a kernel interface, not a file"


def _refuse_kernel_path(path: Path) -> None:
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return  # the open says what is wrong with it
    if any(real == top or real.startswith(top + "/") for top in KERNEL_FILE_SYSTEMS):
        raise FileRefusedError(path, _KERNEL_REASON)


def _kernel_devices() -> set[int]:
    found = set()
    for top in KERNEL_FILE_SYSTEMS:
        with contextlib.suppress(OSError):  # not mounted here
            found.add(os.stat(top).st_dev)
    return found


def call_within(deadline_s: float, work: Callable[[], T], name: str) -> T:
    """``work()``, or TimeoutError after ``deadline_s``.

    For calls that have no timeout of their own (a read, getaddrinfo): the call runs in a
    daemon thread, which is left behind, to end when the call does, if it takes longer.
    """
    done: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            failed.append(exc)

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(deadline_s)
    if worker.is_alive():
        raise TimeoutError(f"{name}: no answer in {deadline_s:g}s")
    if failed:
        raise failed[0]
    return done[0]


def _size(limit: int) -> str:
    if limit % (1 << 20) == 0:
        return f"{limit >> 20} MiB"
    if limit % (1 << 10) == 0:
        return f"{limit >> 10} KiB"
    return f"{limit} bytes"
