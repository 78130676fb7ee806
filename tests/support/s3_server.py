"""A real S3-compatible server on 127.0.0.1 for tests and benchmarks: moto's standalone server.

``S3Server.start()`` runs ``python -m moto.server`` on a free port and waits until it answers; ``env``
holds the variables that point every S3 client of this process and of its children at it
(``AWS_ENDPOINT_URL``, dummy keys, no shared AWS config), so that nothing can reach a real cloud endpoint.
``bucket()`` creates a new empty bucket and returns its name. ``recording()`` lists the requests the
server receives while a block runs (moto's request recorder). ``stop()`` ends the server.

``start_listening`` (a server command on a free port, waited for) serves the other local servers of the
tests too. Run standalone (for benchmarks): ``python tests/support/s3_server.py``; it prints the endpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from process_tools import free_port


def start_listening(
    command: Callable[[int], list[str]], ready_path: str, timeout: float, **popen: Any
) -> tuple[subprocess.Popen, int]:
    """Run the server ``command(port)`` on a free port of 127.0.0.1 (output discarded) and wait until a
    ``GET ready_path`` answers; return the process and the port."""
    port = free_port()
    argv = command(port)
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen)
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{ready_path}", timeout=2).close()
            return process, port
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait()
                raise RuntimeError(f"{' '.join(argv)}: did not start") from None
            time.sleep(0.05)


class BucketServer(ABC):
    """What the local object stores share: ``client()`` (an fsspec filesystem on the server) and new buckets."""

    @abstractmethod
    def client(self) -> Any:
        """An fsspec filesystem on this server."""

    def bucket(self) -> str:
        """A new, empty bucket's name."""
        name = f"test-{uuid.uuid4().hex[:12]}"
        self.client().mkdir(name)
        return name


class S3Server(BucketServer):
    def __init__(self, process: subprocess.Popen, port: int, scratch: Path) -> None:
        self.process = process
        self.port = port
        self.scratch = scratch
        self.endpoint = f"http://127.0.0.1:{port}"
        self.env = {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }

    @classmethod
    def start(cls, timeout: float = 60.0) -> S3Server:
        scratch = Path(tempfile.mkdtemp(prefix="ltsgen-moto-"))
        process, port = start_listening(
            lambda port: [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            "/moto-api/",
            timeout,
            env=dict(os.environ, MOTO_RECORDER_FILEPATH=str(scratch / "requests.jsonl")),
            cwd=scratch,
        )
        return cls(process, port, scratch)

    def client(self) -> Any:
        """An s3fs filesystem on this server (no listing cache)."""
        import s3fs

        return s3fs.S3FileSystem(
            endpoint_url=self.endpoint,
            key="testing",
            secret="testing",
            skip_instance_cache=True,
            use_listings_cache=False,
        )

    @contextmanager
    def recording(self, ranges: bool = False) -> Iterator[list[tuple]]:
        """Yield a list that holds, after the block, ``(method, path)`` of every request the server received
        during it (path: ``/bucket/key``); with ``ranges``, ``(method, path, its Range header or None)``."""
        requests: list[tuple[str, str]] = []
        self._recorder("reset-recording")
        self._recorder("start-recording")
        try:
            yield requests
        finally:
            self._recorder("stop-recording")
            text = self._recorder("download-recording")
            for line in text.splitlines():
                if line.strip():
                    entry = json.loads(line)
                    request = (entry["method"], urlsplit(entry["url"]).path)
                    headers = {key.lower(): value for key, value in entry.get("headers", {}).items()}
                    requests.append((*request, headers.get("range")) if ranges else request)

    def _recorder(self, action: str) -> str:
        request = urllib.request.Request(f"{self.endpoint}/moto-api/recorder/{action}", method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read().decode("utf-8")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)


if __name__ == "__main__":
    server = S3Server.start()
    print(server.endpoint, flush=True)
    try:
        server.process.wait()
    except KeyboardInterrupt:
        server.stop()
