"""gunicorn's threaded worker, hardened so that slow or stalled clients cannot pin it.

The stock ``gthread`` worker parks idle connections in its event loop, but

- once a request's first bytes arrive, a thread reads it with blocking calls
  and no time limit: a client trickling its headers or body (or never reading
  the answer) holds that thread indefinitely, and ``threads`` such clients
  stop the worker;
- closing a connection "gracefully" (send FIN, then wait for the client's)
  runs on the event loop itself and waits up to 2 s for a client that never
  closes, during which the worker accepts and dispatches nothing.

``HookWorker`` gives every request ``request_timeout`` seconds from the moment
a thread takes it up; the event loop, which wakes at least once a second,
shuts down the socket of any request past its deadline, so the blocked read or
write fails at once and the thread is free again (requests waiting for a
thread are not charged for the wait).  And it closes connections gracefully
without waiting: FIN at once, then the event loop drains what the client
still sends and closes on its FIN, or after ``LINGER`` seconds.

Both deadline tables are insertion-ordered dicts with one timeout each, so the
oldest entry expires first and each check looks at expired entries only.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from functools import partial
from typing import Any

from gunicorn.workers.gthread import ThreadWorker

DEFAULT_REQUEST_TIMEOUT = 15.0
LINGER = 2.0


def _expired(deadlines: dict[Any, float], now: float) -> list[Any]:
    """Remove and return the entries of ``deadlines`` (oldest first) whose time has come."""
    out = []
    while deadlines:
        key, deadline = next(iter(deadlines.items()))
        if deadline > now:
            break
        del deadlines[key]
        out.append(key)
    return out


class HookWorker(ThreadWorker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = getattr(self.app, "settings", None)
        self.request_timeout = float(getattr(settings, "request_timeout", DEFAULT_REQUEST_TIMEOUT))
        self.deadlines: dict[Any, float] = {}  # request in a thread → deadline; any thread
        self.deadlines_lock = threading.Lock()
        self.lingering: dict[Any, float] = {}  # closing connection → deadline; event loop only

    def handle(self, conn: Any) -> Any:
        """Runs in a pool thread: the request's clock starts now."""
        with self.deadlines_lock:
            self.deadlines.pop(conn, None)
            self.deadlines[conn] = time.monotonic() + self.request_timeout
        return super().handle(conn)

    def finish_request(self, conn: Any, fs: Any) -> None:
        with self.deadlines_lock:
            self.deadlines.pop(conn, None)
        if fs.cancelled() or fs.exception() is not None or fs.result():
            super().finish_request(conn, fs)  # kept alive, deferred, or failed: gunicorn's way
            return
        self.nr_conns -= 1
        self._linger(conn)

    def _linger(self, conn: Any) -> None:
        try:
            conn.sock.setblocking(False)
            conn.sock.shutdown(socket.SHUT_WR)
            self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._drain, conn))
        except (OSError, ValueError):
            conn.close()
            return
        self.lingering[conn] = time.monotonic() + LINGER

    def _drain(self, conn: Any, sock: Any) -> None:
        try:
            if sock.recv(65536):
                return
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            pass
        self.lingering.pop(conn, None)
        self._close(conn)

    def _close(self, conn: Any) -> None:
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass
        conn.close()

    def murder_pending(self) -> None:
        super().murder_pending()
        now = time.monotonic()
        for conn in _expired(self.lingering, now):
            self._close(conn)
        with self.deadlines_lock:
            expired = _expired(self.deadlines, now)
        for conn in expired:
            self.log.warning("closing connection from %s: request not completed within %ss",
                             conn.client, self.request_timeout)
            try:
                # The plain socket's shutdown, also for TLS: it only wakes the thread blocked on it.
                socket.socket.shutdown(conn.sock, socket.SHUT_RDWR)
            except OSError:
                pass
