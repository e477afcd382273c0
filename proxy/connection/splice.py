"""Moving the rest of a streamed frame from one socket to the other in the kernel (``splice(2)``), not through Python.

Once a frame's prefix is parsed and its handler chose ``STREAM``, the proxy has nothing more to read in it: the
rest could go from socket to socket without being copied into Python and back. On Linux, ``splice(2)`` moves it
socket -> pipe -> socket. The socket code (:mod:`proxy.connection.client_socket`) starts a :class:`Splice` when a
streamed frame still has at least :data:`SPLICE_MIN_BYTES` to come and nothing waits in the destination's write
buffer; the source transport is paused meanwhile (nothing else reads that socket, and everything it read is
already forwarded), writes for the destination wait until the splice ends, and the frame splitter is told how
many bytes passed (:meth:`proxy.codec.frame.FrameSplitter.passed`). Everywhere else, and wherever the platform has
no ``splice`` or a side is TLS, the copying path stays.

The transports own the two sockets' file descriptors in the event loop, so a splice waits for readability or
writability on duplicates of them (``loop.add_reader``/``add_writer`` refuse a transport's own). The pipe holds at
most :data:`PIPE_BYTES`: that is how far the source is read ahead of what the destination took, as the copying
path's read buffer bounds it. A pipe left empty goes back to a small pool for the next splice.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import sys
from collections.abc import Callable

SPLICE_MIN_BYTES = 64 * 1024  # a frame with less than this still to come is copied: two syscalls cost more
BOUNDARY_READ_BYTES = 64 * 1024  # with splicing on, a read at a frame boundary takes at most this much
PIPE_BYTES = 1024 * 1024  # pipe capacity asked for (the kernel may give less: pipe-max-size, per-user limits)
TURN_BYTES = 4 * 1024 * 1024  # moved in one go before other connections get the loop again
POOL_PIPES = 16  # empty pipes kept for the next splices

_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)
_FLAGS = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)

SOURCE, DESTINATION, UNSUPPORTED = "source", "destination", "unsupported"
Failure = tuple[str, OSError]  # why a splice ended early: the side (one of the three above) and the error met there
# splice(2) refusing these sockets at the first call: nothing has moved, the caller copies instead
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})


def splice_supported() -> bool:
    """This platform can splice between sockets (Linux, Python >= 3.10)."""
    return sys.platform.startswith("linux") and hasattr(os, "splice")


_pool: list[tuple[int, int, int]] = []  # empty pipes: (read end, write end, capacity)


def pooled_pipes() -> int:
    """Empty pipes this process keeps for the next splices (two file descriptors each), at most POOL_PIPES."""
    return len(_pool)


def _take_pipe() -> tuple[int, int, int]:
    if _pool:
        return _pool.pop()
    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        capacity = fcntl.fcntl(w, _F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:  # over the user's pipe limits: the default size still works
        capacity = fcntl.fcntl(w, _F_GETPIPE_SZ)
    return r, w, capacity


def _give_back(pipe: tuple[int, int, int], empty: bool) -> None:
    if empty and len(_pool) < POOL_PIPES:
        _pool.append(pipe)
    else:
        os.close(pipe[0])
        os.close(pipe[1])


class Splice:
    """Moves ``nbytes`` from socket ``src`` to socket ``dst`` (raw fds, non-blocking, owned by paused or idle
    transports), reporting through callables: ``done(moved, failure)`` once (failure None, or (SOURCE,
    DESTINATION or UNSUPPORTED, the OSError); UNSUPPORTED: the first call was refused and nothing moved); a
    source at its end stops the splice early with no failure (``moved`` says how far it got); ``blocked(on)`` when
    the destination stops (True) and starts again (False) taking bytes; ``read()`` after bytes came from the
    source. Use :func:`open_splice`; :meth:`cancel` frees everything at once."""

    __slots__ = (
        "_loop",
        "_src",
        "_dst",
        "_watch_src",
        "_watch_dst",
        "_pipe",
        "_to_read",
        "_in_pipe",
        "moved",
        "_done",
        "_blocked_cb",
        "_read_cb",
        "_blocked",
        "_watching",
        "_finished",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        src: int,
        dst: int,
        nbytes: int,
        *,
        done: Callable[[int, Failure | None], None],
        blocked: Callable[[bool], None],
        read: Callable[[], None],
    ) -> None:
        self._loop = loop
        self._src, self._dst = src, dst
        self._to_read = nbytes
        self._in_pipe = 0
        self.moved = 0
        self._done, self._blocked_cb, self._read_cb = done, blocked, read
        self._blocked = False
        self._watching: tuple[int, bool] | None = None  # (duplicate fd, writable) the loop watches for us
        self._finished = False
        self._pipe = _take_pipe()
        try:
            self._watch_src = os.dup(src)
            try:
                self._watch_dst = os.dup(dst)
            except OSError:
                os.close(self._watch_src)
                raise
        except OSError:
            _give_back(self._pipe, True)
            raise

    def start(self) -> None:
        self._pump()

    def _pump(self) -> None:
        """Fill the pipe from the source and empty it into the destination until both wait, or all has moved."""
        r, w, capacity = self._pipe
        src, dst = self._src, self._dst
        turn = 0
        while True:
            progressed = False
            if self._to_read and self._in_pipe < capacity:
                try:
                    n = os.splice(src, w, min(self._to_read, capacity - self._in_pipe), flags=_FLAGS)
                except BlockingIOError:  # the source has nothing now (or the pipe's slots are full)
                    n = -1
                except OSError as exc:
                    first = not self.moved and not self._in_pipe and exc.errno in _UNSUPPORTED
                    self._finish((UNSUPPORTED if first else SOURCE, exc))
                    return
                if n == 0:  # the source's end (its transport finds it again once resumed)
                    self._to_read = 0
                elif n > 0:
                    self._to_read -= n
                    self._in_pipe += n
                    progressed = True
                    self._read_cb()
                    if self._finished:
                        return
            if self._in_pipe:
                try:
                    m = os.splice(r, dst, self._in_pipe, flags=_FLAGS)
                except BlockingIOError:  # the destination's socket buffer is full
                    m = 0
                except OSError as exc:
                    self._finish((DESTINATION, exc))
                    return
                if m:
                    self._in_pipe -= m
                    self.moved += m
                    turn += m
                    progressed = True
                    if self._blocked:
                        self._blocked = False
                        self._blocked_cb(False)
                        if self._finished:
                            return
            if not self._to_read and not self._in_pipe:
                self._finish(None)
                return
            if not progressed:
                if self._in_pipe:  # the destination takes nothing (the source may have more, or the pipe is full)
                    if not self._blocked:
                        self._blocked = True
                        self._blocked_cb(True)
                        if self._finished:
                            return
                    self._watch(self._watch_dst, True)
                else:  # the pipe is empty, so the source has nothing now
                    self._watch(self._watch_src, False)
                return
            if turn >= TURN_BYTES:  # other connections' turn; continue on the next loop iteration
                self._unwatch()
                self._loop.call_soon(self._resume)
                return

    def _resume(self) -> None:
        if not self._finished and self._watching is None:
            self._pump()

    def _watch(self, fd: int, writable: bool) -> None:
        if self._watching == (fd, writable):
            return  # level-triggered: the loop calls again while it holds
        self._unwatch()
        if writable:
            self._loop.add_writer(fd, self._pump)
        else:
            self._loop.add_reader(fd, self._pump)
        self._watching = (fd, writable)

    def _unwatch(self) -> None:
        watching = self._watching
        if watching is not None:
            self._watching = None
            if watching[1]:
                self._loop.remove_writer(watching[0])
            else:
                self._loop.remove_reader(watching[0])

    def _release(self) -> None:
        """Stop watching before the duplicates close (a registration must never outlive its fd)."""
        self._finished = True
        self._unwatch()
        os.close(self._watch_src)
        os.close(self._watch_dst)
        _give_back(self._pipe, not self._in_pipe)

    def _finish(self, failure: Failure | None) -> None:
        self._release()
        self._done(self.moved, failure)

    def cancel(self) -> None:
        """The connection is closing: stop now, free the pipe and the duplicates; ``done`` is not called."""
        if not self._finished:
            self._release()


def open_splice(
    loop: asyncio.AbstractEventLoop,
    src: int,
    dst: int,
    nbytes: int,
    *,
    done: Callable[[int, Failure | None], None],
    blocked: Callable[[bool], None],
    read: Callable[[], None],
) -> Splice | None:
    """A :class:`Splice` ready to start, or None when the process is out of descriptors for it (the caller copies)."""
    try:
        return Splice(loop, src, dst, nbytes, done=done, blocked=blocked, read=read)
    except OSError:
        return None
