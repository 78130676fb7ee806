"""The loaders' reads of ``s3://`` objects (whole, or byte ranges) through botocore's client alone.

A remote loader's first batch waits for its S3 client: s3fs's stack (aiobotocore, aiohttp, fsspec's async
layer) takes about 0.4 s to import, botocore alone about 0.15 s. The loaders only read, so they read through
one botocore client per process, which resolves credentials, region and endpoint as s3fs does (the same
botocore session: ``AWS_ENDPOINT_URL``, ``AWS_PROFILE``, ``~/.aws``, instance roles). It takes the s3fs
storage options that set the client (``CLIENT_OPTIONS``), from ``storage_options`` over fsspec's defaults for
``s3`` as ``storage.filesystem`` merges them; with any other option ``client`` is None, and the caller reads
through s3fs.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ltsgen.errors import require

# s3fs's options that only configure its botocore client (with s3fs's defaults where it has its own)
CLIENT_OPTIONS = ("key", "secret", "token", "profile", "anon", "endpoint_url", "use_ssl", "requester_pays")
CLIENT_OPTIONS += ("client_kwargs", "config_kwargs")
IGNORED_OPTIONS = ("skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths")
S3FS_TIMEOUTS = {"connect_timeout": 5, "read_timeout": 15}
POOL_CONNECTIONS = 32  # a process's decoding threads, each with a few concurrent ranges
# error codes of a GET whose object or bucket does not exist (404 without a body: a HEAD-like answer)
NOT_FOUND = ("NoSuchKey", "NoSuchBucket", "404", "NotFound")

# a botocore session per options holds what a client is made from (the service model, endpoints and resolved
# credentials: about 0.1 s of CPU to load) and no connection, so a DataLoader worker forked from the process
# that made it makes its own client from it in a few ms; clients hold connections, one per process
_SESSIONS: dict[str, Any] = {}
_CLIENTS: dict[tuple[int, str], S3Client] = {}
_LOCK = threading.Lock()


class S3Client:
    """Reads objects of ``s3://`` URLs with one botocore client (thread-safe; one per process)."""

    def __init__(self, session: Any, options: dict[str, Any]) -> None:
        config = {
            **S3FS_TIMEOUTS,
            "max_pool_connections": POOL_CONNECTIONS,
            **copy.deepcopy(options.get("config_kwargs") or {}),  # botocore rewrites its retries in place
        }
        if options.get("anon"):
            config["signature_version"] = _botocore().UNSIGNED
        arguments = {
            "aws_access_key_id": options.get("key"),
            "aws_secret_access_key": options.get("secret"),
            "aws_session_token": options.get("token"),
            "endpoint_url": options.get("endpoint_url"),
            "use_ssl": options.get("use_ssl", True),
        }
        arguments = {name: value for name, value in arguments.items() if value is not None}
        arguments.update(options.get("client_kwargs") or {})
        self.extra = {"RequestPayer": "requester"} if options.get("requester_pays") else {}
        self.client = session.create_client("s3", config=_botocore("config").Config(**config), **arguments)

    def read(self, url: str) -> bytes:
        """The whole object at ``url``."""
        return self._get(url)

    def read_ranges(self, url: str, spans: list[tuple[int, int]]) -> list[bytes]:
        """Bytes ``[start, stop)`` of each span of the object at ``url``, requested concurrently."""
        if len(spans) == 1:
            return [self._get(url, *spans[0])]
        with ThreadPoolExecutor(min(len(spans), 8), thread_name_prefix="ltsgen-s3") as pool:
            return list(pool.map(lambda span: self._get(url, *span), spans))

    def _get(self, url: str, start: int | None = None, stop: int | None = None) -> bytes:
        bucket, key = split(url)
        extra = dict(self.extra)
        if start is not None:
            if stop <= start:
                return b""
            extra["Range"] = f"bytes={start}-{stop - 1}"
        try:
            response = self.client.get_object(Bucket=bucket, Key=key, **extra)
        except _botocore("exceptions").ClientError as error:
            if error.response.get("Error", {}).get("Code") in NOT_FOUND:
                raise FileNotFoundError(url) from None
            raise
        with response["Body"] as body:
            return body.read()


def client(storage_options: dict[str, Any] | None) -> S3Client | None:
    """This process's ``S3Client`` for ``storage_options`` (over fsspec's defaults for ``s3``), or None when
    an option is one only s3fs understands."""
    import fsspec.config

    options = {**fsspec.config.conf.get("s3", {}), **(storage_options or {})}
    if any(name not in CLIENT_OPTIONS + IGNORED_OPTIONS for name in options):
        return None
    options = {name: value for name, value in options.items() if name in CLIENT_OPTIONS}
    key = json.dumps(options, sort_keys=True, default=str)
    with _LOCK:  # the decoding threads of a process share the client made first
        if (os.getpid(), key) not in _CLIENTS:
            if key not in _SESSIONS:
                _SESSIONS[key] = _botocore("session").Session(profile=options.get("profile"))
            _CLIENTS[os.getpid(), key] = S3Client(_SESSIONS[key], options)
        return _CLIENTS[os.getpid(), key]


def _botocore(submodule: str = "") -> Any:
    """``botocore`` or one of its submodules (without botocore, a one-line error naming the ``s3`` extra)."""
    botocore = require("botocore", "s3", "s3:// paths")
    return importlib.import_module(f"botocore.{submodule}") if submodule else botocore


def _after_fork() -> None:
    global _LOCK
    _LOCK = threading.Lock()  # a thread of the parent may have held it


os.register_at_fork(after_in_child=_after_fork)


def split(url: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> ``(bucket, key)``, the key verbatim as s3fs writes it (``s3://b//x`` names the
    key ``/x``, and ``#`` is part of a key, not a fragment): the loaders read what the builders wrote."""
    bucket, _, key = url[len("s3://") :].partition("/")
    return bucket, key


def plain(url: str) -> bool:
    """Whether ``url`` is a plain ``s3://bucket/key`` that the client reads (not an access point ARN or a
    versioned path, which s3fs parses)."""
    return url.startswith("s3://") and not url.startswith("s3://arn:") and "?" not in url
