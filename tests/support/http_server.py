"""The local HTTP servers' shared parts: a thread that serves until ``shutdown()``, and a folder served."""

from __future__ import annotations

import functools
import http.server
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SHUTDOWN_POLL_S = 0.02  # how often serve_forever looks for shutdown(); its default 0.5 s is a wait per stop


def serving_thread(server: socketserver.BaseServer, name: str | None = None) -> threading.Thread:
    """A daemon thread (not started) that runs ``server`` until ``server.shutdown()``."""
    return threading.Thread(target=server.serve_forever, args=(SHUTDOWN_POLL_S,), daemon=True, name=name)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def served_folder(directory: Path) -> Iterator[str]:
    """``directory`` over HTTP on 127.0.0.1 (a free port) while the block runs; yields its base URL."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=directory)
    )
    thread = serving_thread(server)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
