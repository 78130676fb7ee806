"""Where dataset files live: a local folder, ``file://``, or an object store or hub through fsspec.

``Storage(url, storage_options)`` is the one place that turns a path or URL into a filesystem, and it has
the primitives builders and loaders need, with the same meaning everywhere:

- ``open``, ``read_bytes``, ``exists``, ``files`` (every file below a folder, with its size), ``size``,
  ``stamp`` (the store's version tag of a file: its ETag or generation), ``sha256``,
  ``remove``, ``remove_tree``;
- ``publish(relpath)``: write a file so that it appears under its final name only once complete. Locally
  a temporary file beside it is renamed over it; on an object store (which has no rename) the file is
  written to a local staging file and uploaded under its final name in one request (S3 multipart uploads
  become visible only when completed, and are aborted on failure);
- ``append_line`` / ``read_lines``: an append-only log (a build journal). Locally one file, appended and
  fsynced; on an object store, where objects cannot be appended to, one small object per line below
  ``relpath/``;
- ``lock(relpath)``: an exclusive claim. Locally ``flock`` on a file (released by the kernel when the
  process dies). An object store has no locks: the claim is a lease object created only if absent,
  renewed every ``LEASE_RENEW_SECONDS`` by a thread, and taken over when its holder is gone (a process on
  this host that no longer runs, or a lease not renewed for ``LEASE_SECONDS``).

Schemes: local paths and ``file://``; ``s3://`` (extra ``s3``), ``gs://`` / ``gcs://`` (extra ``gcs``),
``hf://`` (extra ``hf``, read-only) and ``http(s)://`` (read-only). Credentials and endpoints come from each
filesystem's standard sources (for S3: ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``,
``AWS_PROFILE`` and ``~/.aws``; for GCS: ``GOOGLE_APPLICATION_CREDENTIALS``, the metadata server, and
``STORAGE_EMULATOR_HOST`` for an emulator, reached without credentials; for the Hub: ``HF_ENDPOINT``,
``HF_TOKEN``); ``storage_options`` go to the filesystem as keyword arguments (for S3 e.g.
``{"profile": "lab", "endpoint_url": "http://minio:9000"}``).

A ``Storage`` pickles as its URL and options (no connection), so worker processes and Ray tasks get their
own filesystem, one per process.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from ltsgen.errors import LtsgenError, first_line, require

from .errors import LoaderError
from .files import atomic_path, open_regular, read_regular_file

# scheme -> (module, extra) for the filesystems that need an optional dependency
OPTIONAL_SCHEMES = {"s3": ("s3fs", "s3"), "gs": ("gcsfs", "gcs"), "gcs": ("gcsfs", "gcs")}
OPTIONAL_SCHEMES["hf"] = ("huggingface_hub", "hf")
READ_ONLY_SCHEMES = ("hf", "http", "https")
# where fsspec's own ``exists`` answers False for any failure (an HTTP 503, a network error): ``_found`` asks
EXISTS_BY_INFO = ("hf", "http", "https")
# object stores whose listings fsspec would otherwise cache per process (other processes write there too)
LISTING_CACHE_SCHEMES = ("s3", "gs", "gcs")
GCS_SCHEMES = ("gs", "gcs")
GCS_EMULATOR_VARIABLE = "STORAGE_EMULATOR_HOST"
STAMP_FIELDS = ("ETag", "etag", "generation", "md5Hash", "crc32c")
LEASE_SECONDS = 120.0
LEASE_RENEW_SECONDS = 30.0
STAGING_DIR = "ltsgen-staging"


class StorageError(LoaderError):
    """A file or folder that cannot be read, written or claimed; the message is one line naming it, and
    ``reason`` the cause alone (``"Permission denied"``, ``"not found"``).

    The loaders' one subclass, because callers act on it: builds, training runs and tokenizer writes say
    "cannot write there (REASON)" (a bad manifest there is another message), ``read_manifest`` asks whether
    a folder without one is a dataset at all, the lease reads a missing file as no lease, and a loader with
    ``on_error="skip"`` never skips a shard for it (a cache folder that cannot be written is the user's to
    fix, not a bad shard)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


class LockHeld(StorageError):
    """``lock`` found the claim held by another live process. Builds (``claim``, attach, the finishing
    step) and training runs catch it to name the holder (``build_running``) or to leave the finishing to it."""


def is_url(path_or_url: str | os.PathLike) -> bool:
    """Whether ``path_or_url`` names a location through a scheme (``s3://...``) rather than a local path."""
    return "://" in str(path_or_url)


def scheme_of(path_or_url: str | os.PathLike) -> str:
    """``"s3"``, ``"gs"``, ``"file"``, ...; ``""`` for a local path."""
    text = str(path_or_url)
    return urlsplit(text).scheme.lower() if is_url(text) else ""


def parse_storage_options(text: str | None) -> dict[str, Any]:
    """The ``--storage-options`` JSON object (``None`` or empty: no options)."""
    if not text:
        return {}
    try:
        options = json.loads(text)
    except json.JSONDecodeError as error:
        raise StorageError(
            f"--storage-options: not valid JSON ({error.msg} at column {error.colno})"
        ) from None
    except (ValueError, RecursionError) as error:  # an integer of thousands of digits, nesting too deep
        raise StorageError(f"--storage-options: not readable JSON ({error})") from None
    if not isinstance(options, dict):
        raise StorageError('--storage-options: must be a JSON object, e.g. \'{"profile": "lab"}\'')
    return options


_FILESYSTEMS: dict[tuple[int, str, str | None, str], Any] = {}  # (pid, scheme, emulator, options)


def filesystem(url: str, storage_options: dict[str, Any] | None = None):
    """The fsspec filesystem of ``url``'s scheme with ``storage_options``, and what the URL itself says of
    it (an FTP or SFTP host and port), one per process, options and fsspec defaults for the scheme
    (``fsspec.config.conf``, which ``train``, ``evaluate`` and ``compare`` set from ``--storage-options``
    while they run: a filesystem made before them must not be reused under them).

    A missing optional dependency raises ``MissingDependency`` naming the extra; HTTP falls back to
    fsspec's blocking client where aiohttp is not installed.
    """
    import fsspec.config

    scheme = urlsplit(url).scheme
    options = dict(storage_options or {})
    if scheme in LISTING_CACHE_SCHEMES:
        options.setdefault("use_listings_cache", False)
    emulator = os.environ.get(GCS_EMULATOR_VARIABLE) if scheme in GCS_SCHEMES else None
    if emulator:
        options.setdefault("token", "anon")  # an emulator takes no credentials (as google-cloud-storage does)
    defaults: dict[str, Any] = {}
    for name in GCS_SCHEMES if scheme in GCS_SCHEMES else (scheme,):  # fsspec's order: the last one wins
        defaults.update(fsspec.config.conf.get(name, {}))
    if scheme in OPTIONAL_SCHEMES:
        module, extra = OPTIONAL_SCHEMES[scheme]
        require(module, extra, f"{scheme}:// paths")
    cls = _filesystem_class(scheme, bool(emulator or {**defaults, **options}.get("endpoint_url")), url)
    try:
        options = {**cls._get_kwargs_from_urls(url), **options}  # an FTP host and port, say
    except ValueError as error:  # a port that is no number, a broken IPv6 address
        raise StorageError(f"{url}: not a valid URL ({error})") from None
    key = (os.getpid(), scheme, emulator, json.dumps([defaults, options], sort_keys=True, default=str))
    if key not in _FILESYSTEMS:
        try:
            _FILESYSTEMS[key] = cls(skip_instance_cache=True, **options)
        except (TypeError, ValueError) as error:
            raise StorageError(f"{scheme}:// storage options {options}: {error}") from None
        except OSError as error:  # a server that refuses the connection its filesystem opens at once
            raise StorageError(f"{url}: cannot connect ({error.strerror or error})") from None
    return _FILESYSTEMS[key]


def _filesystem_class(scheme: str, emulated: bool, url: str) -> type:
    """fsspec's filesystem class for ``scheme`` (``emulated``: see ``_gcs_class``); HTTP falls back to the
    blocking client without aiohttp."""
    import fsspec

    if scheme in GCS_SCHEMES:
        return _gcs_class(emulated)
    try:
        return fsspec.get_filesystem_class(scheme)
    except ImportError:
        if scheme not in ("http", "https"):
            raise
        from fsspec.implementations.http_sync import HTTPFileSystem

        return HTTPFileSystem
    except ValueError:  # a protocol fsspec does not know
        raise StorageError(f"{url}: {scheme}:// is not a storage fsspec knows") from None


def _gcs_class(emulated: bool) -> type:
    """gcsfs's filesystem class; ``emulated``: for an emulator (``STORAGE_EMULATOR_HOST``) or another
    endpoint (``endpoint_url``).

    gcsfs's default class asks Google's gRPC control API for each bucket's layout (to support zonal
    buckets) before it reads or writes there. An emulator or another endpoint serves only the JSON API, and
    every such call would wait out a 60 s timeout, on every operation; there the JSON-API class alone is
    used, which is the whole of gcsfs's HTTP path.
    """
    import fsspec

    if emulated:
        return require("gcsfs", "gcs", "gs:// paths").core.GCSFileSystem
    return fsspec.get_filesystem_class("gs")


class Storage:
    """A folder, local or remote, addressed by paths relative to it (``/``-separated).

    Args:
        url: a local path, ``file://`` path, or fsspec URL (``s3://bucket/prefix``, ``gs://...``,
            ``hf://datasets/org/name``, ``https://...``).
        storage_options: keyword arguments for the filesystem (credentials, endpoint, profile, ...).
    """

    def __init__(self, url: str | os.PathLike, storage_options: dict[str, Any] | None = None) -> None:
        text = str(url)
        self.scheme = scheme_of(text)
        self.options = dict(storage_options or {})
        if self.scheme in ("", "file"):
            local = text[len("file://") :] if self.scheme == "file" else text
            self.root: Path | None = Path(local)
            self.url = text if self.scheme == "file" else str(self.root)
        else:
            self.root = None
            self.url = text.rstrip("/")
        self.read_only = self.scheme in READ_ONLY_SCHEMES

    def __repr__(self) -> str:
        return f"Storage({self.url!r})"

    def __str__(self) -> str:
        return self.url

    def __reduce__(self):
        return (Storage, (self.url, self.options))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Storage) and (self.url, self.options) == (other.url, other.options)

    def __hash__(self) -> int:
        return hash(self.url)

    @property
    def is_local(self) -> bool:
        return self.root is not None

    @property
    def fs(self):
        """The fsspec filesystem (local folders use the OS directly and have none)."""
        if self.root is not None:
            raise StorageError(f"{self.url}: a local folder has no remote filesystem")
        return filesystem(self.url, self.options)

    # ---------------------------------------------------------------- naming

    def location(self, relpath: str = "") -> str:
        """The path or URL of ``relpath`` (``""``: the folder itself), as messages should show it."""
        if not relpath:
            return self.url
        if self.root is not None:
            return str(self.root.joinpath(*relpath.split("/")))
        return f"{self.url}/{relpath}"

    def local_path(self, relpath: str = "") -> Path:
        """The local path of ``relpath``; only for a local folder."""
        if self.root is None:
            raise StorageError(f"{self.location(relpath)}: not a local path")
        return self.root.joinpath(*relpath.split("/")) if relpath else self.root

    def child(self, relpath: str) -> Storage:
        """The folder ``relpath`` inside this one, with the same options."""
        if self.root is not None:
            return Storage(self.local_path(relpath), self.options)
        return Storage(self.location(relpath), self.options)

    # ---------------------------------------------------------------- reading

    def exists(self, relpath: str = "") -> bool:
        """Whether a file or folder ``relpath`` exists (an object store has a folder once it holds a file).
        Only "not found" is False: a store that fails to answer is a ``StorageError``."""
        if self.root is not None:
            return self.local_path(relpath).exists()
        if self.scheme not in EXISTS_BY_INFO:
            with self._errors(relpath, "be read"):
                return self.fs.exists(self.location(relpath))
        return self._found(relpath) is not None

    def is_file(self, relpath: str) -> bool:
        if self.root is not None:
            return self.local_path(relpath).is_file()
        found = self._found(relpath)
        return found is not None and found.get("type") == "file"

    def files(self, relpath: str = "") -> dict[str, int]:
        """Every file below the folder ``relpath`` (recursively): path relative to *this* folder -> size."""
        return {name: size for name, (size, _) in self.listing(relpath).items()}

    def listing(self, relpath: str = "") -> dict[str, tuple[int, str | None]]:
        """Every file below the folder ``relpath``: path relative to this folder -> (size, stamp), from one
        listing of the store (see ``stamp``)."""
        if self.root is not None:
            base = self.local_path(relpath)
            if not base.is_dir():
                return {}
            found = {}
            for folder, _, names in os.walk(base):
                for name in names:
                    path = Path(folder, name)
                    try:
                        found[path.relative_to(self.root).as_posix()] = (path.stat().st_size, None)
                    except FileNotFoundError:  # removed while walking
                        continue
            return dict(sorted(found.items()))
        with self._errors(relpath, "be listed"):
            try:
                listing = self.fs.find(self.location(relpath), detail=True)
            except FileNotFoundError:
                return {}
        prefix = self.fs._strip_protocol(self.url).rstrip("/") + "/"
        return {
            name[len(prefix) :]: (int(info.get("size") or 0), _stamp(info))
            for name, info in sorted(listing.items())
            if name.startswith(prefix) and info.get("type") != "directory" and not name.endswith("/")
            # a key ending in "/" is a folder marker (what a console's "Create folder" makes), not a file
        }

    def size(self, relpath: str) -> int:
        if self.root is not None:
            with self._errors(relpath, "be read"):
                return self.local_path(relpath).stat().st_size
        return int(self._info(relpath).get("size") or 0)

    def stamp(self, relpath: str) -> str | None:
        """The store's version tag of the file (ETag, generation, ...); ``None`` locally or when it has none.

        It changes whenever the object is written again, so a recorded stamp that still matches shows that
        the file is the one written then, without reading it.
        """
        return None if self.root is not None else _stamp(self._info(relpath))

    def open(self, relpath: str, mode: str = "rb") -> IO:
        """A file object for reading (``"rb"``, ``"r"``); write through ``publish``."""
        if "r" not in mode:
            raise StorageError(f"{self.location(relpath)}: open() reads; write through publish()")
        with self._errors(relpath, "be read"):
            if self.root is not None:
                return open_regular(self.local_path(relpath), mode)
            return self.fs.open(self.location(relpath), mode)

    def read_bytes(self, relpath: str) -> bytes:
        with self._errors(relpath, "be read"):
            if self.root is not None:
                return read_regular_file(self.local_path(relpath))
            return self.fs.cat_file(self.location(relpath))

    def read_text(self, relpath: str) -> str:
        try:
            return self.read_bytes(relpath).decode("utf-8")
        except UnicodeDecodeError as error:
            raise StorageError(f"{self.location(relpath)}: not UTF-8 text ({error})") from None

    def sha256(self, relpath: str, chunk_size: int = 1 << 20) -> str:
        """The sha256 of the file's bytes, read as a stream."""
        digest = hashlib.sha256()
        with self.open(relpath) as handle, self._errors(relpath, "be read"):
            while chunk := handle.read(chunk_size):
                digest.update(chunk)
        return digest.hexdigest()

    # ---------------------------------------------------------------- writing

    @contextmanager
    def publish(self, relpath: str) -> Iterator[Path]:
        """Yield a local temporary path to write; when the block succeeds it becomes ``relpath`` at once
        (rename locally, one upload to an object store); when it fails, nothing appears."""
        self.check_writable(relpath)
        if self.root is not None:
            stage = "prepare"
            try:
                with atomic_path(self.local_path(relpath)) as tmp:
                    stage = "write"
                    yield tmp
                    stage = "rename"
            except OSError as error:
                if stage == "write":  # the caller's own failure, not the folder's
                    raise
                reason = error.strerror or str(error)
                raise StorageError(
                    f"{self.location(relpath)}: cannot be written ({reason})", reason
                ) from None
            return
        staging = _staging_file(relpath)
        try:
            yield staging
            with self._errors(relpath, "be written"):
                self.fs.put_file(str(staging), self.location(relpath))
        finally:
            staging.unlink(missing_ok=True)

    def write_bytes(self, relpath: str, data: bytes) -> None:
        """Publish ``data`` as ``relpath`` (atomically, see ``publish``)."""
        with self.publish(relpath) as tmp:
            tmp.write_bytes(data)

    def remove(self, relpath: str) -> None:
        """Remove the file ``relpath`` if it exists (only inside this folder: see ``_contained``)."""
        self.check_writable(relpath)
        self._contained(relpath)
        with self._errors(relpath, "be removed"):
            if self.root is not None:
                self.local_path(relpath).unlink(missing_ok=True)
            else:
                try:
                    self.fs.rm_file(self.location(relpath))
                except FileNotFoundError:
                    pass

    def remove_tree(self, relpath: str) -> None:
        """Remove the folder ``relpath`` and everything below it, if it exists (only inside this folder)."""
        self.check_writable(relpath)
        self._contained(relpath)
        with self._errors(relpath, "be removed"):
            if self.root is not None:
                import shutil

                shutil.rmtree(self.local_path(relpath), ignore_errors=True)
                return
            files = [self.location(name) for name in self.files(relpath)]
            if files:
                self.fs.rm(files)

    def remove_log(self, relpath: str) -> None:
        """Remove the log ``relpath`` that ``append_line`` wrote (an object store keeps it as one object per
        line, under ``relpath/``)."""
        if self.root is not None:
            self.remove(relpath)
        else:
            self.remove_tree(relpath)

    def append_line(self, relpath: str, line: str) -> None:
        """Append one line (without its newline) to the log ``relpath``, durably."""
        if "\n" in line:
            raise ValueError("a log line cannot hold a newline")
        self.check_writable(relpath)
        if self.root is not None:
            path = self.local_path(relpath)
            with self._errors(relpath, "be written"):
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "a", encoding="utf-8") as log:
                    log.write(line + "\n")
                    log.flush()
                    os.fsync(log.fileno())
            return
        name = f"{relpath}/{time.time_ns():020d}-{uuid.uuid4().hex[:12]}.line"
        self.write_bytes(name, line.encode("utf-8"))

    def read_lines(self, relpath: str) -> list[str]:
        """The lines of the log ``relpath`` in the order they were appended (none when it does not exist);
        a local log's torn last line (a kill mid-write) is returned as it is, for the caller to skip."""
        if self.root is not None:
            path = self.local_path(relpath)
            if not path.is_file():
                return []
            with self._errors(relpath, "be read"):
                return path.read_text(encoding="utf-8", errors="replace").splitlines()
        names = [self.location(name) for name in self.files(relpath)]
        with self._errors(relpath, "be read"):
            contents = self.fs.cat(names) if names else {}
        return [contents[self.fs._strip_protocol(name)].decode("utf-8", "replace") for name in names]

    # ---------------------------------------------------------------- claims

    @contextmanager
    def lock(self, relpath: str) -> Iterator[None]:
        """Hold the exclusive claim ``relpath`` for the block; ``LockHeld`` when another process holds it."""
        self.check_writable(relpath)
        if self.root is not None:
            import fcntl

            path = self.local_path(relpath)
            with self._errors(relpath, "be written"):
                path.parent.mkdir(parents=True, exist_ok=True)
                handle = open(path, "a")  # noqa: SIM115 - "a": opening it truncates nothing
            with handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise LockHeld(f"{self.location(relpath)}: held by {_holder(path)}") from None
                # the holder, for the message of the process it refuses, while it holds the lock (a killed
                # holder's flock is gone, and the next process writes its own); empty again once released
                handle.truncate(0)
                handle.write(f"process {os.getpid()} on {socket.gethostname()}\n")
                handle.flush()
                try:
                    yield
                finally:
                    handle.truncate(0)
            return
        lease = _Lease(self, relpath)
        lease.acquire()
        try:
            yield
        finally:
            lease.release()
        if lease.lost:  # the block ended, but not as the only holder: no caller may read this as a refusal
            raise LoaderError(lease.lost)

    def lock_holder(self, relpath: str) -> str | None:
        """Who holds the claim ``relpath`` now (``LockHeld``'s reason), or None when nobody does; reads
        only, so that a refusal that comes before taking the claim writes nothing."""
        if self.root is not None:
            import fcntl

            path = self.local_path(relpath)
            try:
                handle = open(path)  # noqa: SIM115 - closed below; opened to read, nothing is written
            except OSError:  # no lock file: never claimed, or claimed by nobody now
                return None
            with handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    return f"{self.location(relpath)}: held by {_holder(path)}"
            return None
        lease = _Lease(self, relpath)._read()
        return None if lease is None or _expired(lease) else _Lease.held(self.location(relpath), lease)

    # ---------------------------------------------------------------- helpers

    def check_writable(self, relpath: str = "") -> None:
        """Refuse a read-only scheme (``hf://``, ``http(s)://``) before anything is written there."""
        if self.read_only:
            raise StorageError(
                f"{self.location(relpath)}: {self.scheme}:// is read-only here; write to a local path, "
                "s3:// or gs://"
            )

    def _info(self, relpath: str) -> dict[str, Any]:
        with self._errors(relpath, "be read"):
            return self.fs.info(self.location(relpath))

    def _found(self, relpath: str) -> dict[str, Any] | None:
        """The store's entry for ``relpath``, None where it says "not found"; any other failure is a
        ``StorageError`` (fsspec's own ``isfile``, and ``exists`` on http:// and hf://, answer False)."""
        with self._errors(relpath, "be read"):
            try:
                return self.fs.info(self.location(relpath))
            except FileNotFoundError as error:
                if _not_found(error):
                    return None
                raise OSError(first_line(error.__cause__)) from None

    def leads_out(self, relpath: str) -> bool:
        """Whether ``relpath``, a file or folder named by data (a manifest, a journal), leads out of this
        folder: a ``..`` or absolute path, or, locally, a folder on its way that a symlink takes elsewhere.
        Its last part is not followed: a symlink there is inside, and removing it removes the link."""
        parts = relpath.split("/")
        if relpath.startswith("/") or any(part in ("", ".", "..") for part in parts):
            return True
        if self.root is None:
            return False
        return not self.local_path(relpath).parent.resolve().is_relative_to(self.root.resolve())

    def _contained(self, relpath: str) -> None:
        """Refuse to remove what ``leads_out``: whoever wrote a path, nothing outside the dataset is removed."""
        if self.leads_out(relpath):
            where = self.location(relpath)
            raise StorageError(
                f"{where}: not removed: the path leads out of {self}", f"{where} leads out of it"
            )

    @contextmanager
    def _errors(self, relpath: str, action: str) -> Iterator[None]:
        """Turn the filesystem's errors (OSError, network clients' own types) into one-line StorageErrors."""
        try:
            yield
        except LtsgenError:
            raise
        except FileNotFoundError:
            raise StorageError(f"{self.location(relpath)}: not found", "not found") from None
        except Exception as error:  # botocore, aiohttp, google-auth raise their own types
            reason = getattr(error, "strerror", None) or first_line(error)
            raise StorageError(f"{self.location(relpath)}: cannot {action} ({reason})", reason) from None


def _not_found(error: FileNotFoundError) -> bool:
    """Whether the store said "not found": fsspec's http:// filesystem raises ``FileNotFoundError`` for any
    failed request (a 503, a refused connection), the failure as its cause with its HTTP status, if any."""
    cause = error.__cause__
    if cause is None or isinstance(cause, FileNotFoundError):
        return True
    status = getattr(cause, "status", None) or getattr(getattr(cause, "response", None), "status_code", None)
    return status in (404, 410)


def locate(
    path_or_url: str | os.PathLike, storage_options: dict[str, Any] | None = None
) -> tuple[Storage, str]:
    """The folder that holds the file ``path_or_url``, and the file's name in it."""
    text = str(path_or_url)
    if scheme_of(text) in ("", "file"):
        local = Path(text[len("file://") :] if text.startswith("file://") else text)
        return Storage(local.parent, storage_options), local.name
    folder, _, name = text.rstrip("/").rpartition("/")
    return Storage(folder, storage_options), name


def as_storage(
    directory: str | os.PathLike | Storage, storage_options: dict[str, Any] | None = None
) -> Storage:
    """``directory`` as a ``Storage`` (one given is returned as it is)."""
    return directory if isinstance(directory, Storage) else Storage(directory, storage_options)


def _stamp(info: dict[str, Any]) -> str | None:
    for name in STAMP_FIELDS:
        if info.get(name):
            return str(info[name])
    return None


def _staging_file(relpath: str) -> Path:
    """A new local file for an upload: ``$TMPDIR/ltsgen-staging/<pid>-<random>-<name>``. Files left by
    processes that no longer run (a kill -9 mid-write) are removed here, the first time in each process."""
    folder = Path(tempfile.gettempdir()) / STAGING_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    if os.getpid() not in _STAGING_SWEPT:
        _STAGING_SWEPT.add(os.getpid())
        for stale in folder.iterdir():
            pid = stale.name.split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                stale.unlink(missing_ok=True)
    name = relpath.rsplit("/", 1)[-1]
    return folder / f"{os.getpid()}-{uuid.uuid4().hex[:12]}-{name}"


_STAGING_SWEPT: set[int] = set()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Lease:
    """The claim of ``lock`` on an object store: a small JSON object created only if absent."""

    def __init__(self, storage: Storage, relpath: str) -> None:
        self.storage, self.relpath = storage, relpath
        self.where = storage.location(relpath)
        self.mine = {"host": socket.gethostname(), "pid": os.getpid(), "pidns": _pid_namespace(),
                     "token": uuid.uuid4().hex}  # fmt: skip
        self.lost: str | None = None  # why another process holds the lease now, once renewal finds it
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _read(self) -> dict[str, Any] | None:
        try:
            lease = json.loads(self.storage.read_bytes(self.relpath))
        except StorageError as error:
            if error.reason == "not found":
                return None
            raise
        except (ValueError, RecursionError):
            return {"renewed": 0}  # unreadable: treat as expired
        return lease if isinstance(lease, dict) else {"renewed": 0}

    def _write(self, create: bool) -> None:
        """Write the lease; ``create``: only if absent (``LockHeld`` when another process created it since
        it was read; a store without create-only writes is written, and ``acquire`` reads it back)."""
        body = json.dumps({**self.mine, "renewed": time.time()}).encode("utf-8")
        fs = self.storage.fs
        with self.storage._errors(self.relpath, "be written"):
            try:
                fs.pipe_file(self.where, body, mode="create" if create else "overwrite")
            except FileExistsError:
                raise LockHeld(f"{self.where}: claimed by another process a moment ago") from None
            except NotImplementedError:
                fs.pipe_file(self.where, body)

    @staticmethod
    def held(where: str, lease: dict[str, Any]) -> str:
        """The reason a live ``lease`` refuses another process."""
        age = time.time() - float(lease.get("renewed", 0))
        return (
            f"{where}: held by process {lease.get('pid')} on {lease.get('host')} "
            f"(renewed {age:.0f}s ago; a lease not renewed for {LEASE_SECONDS:.0f}s expires)"
        )

    def acquire(self) -> None:
        current = self._read()
        if current is not None:
            if not _expired(current):
                raise LockHeld(self.held(self.where, current))
            self.storage.remove(self.relpath)
        self._write(create=True)
        if (self._read() or {}).get("token") != self.mine["token"]:
            raise LockHeld(f"{self.where}: claimed by another process a moment ago")
        self._renewer = threading.Thread(target=self._renew, daemon=True, name="ltsgen-lease")
        self._renewer.start()

    def _renew(self) -> None:
        """Renew the lease while it is this process's; once another process holds it (this one was paused
        past its expiry and the lease taken over), stop and say so in ``lost``."""
        while not self._stop.wait(LEASE_RENEW_SECONDS):
            try:
                current = self._read()
                if (current or {}).get("token") != self.mine["token"]:
                    holder = self.held(self.where, current) if current else "removed"
                    self.lost = (
                        f"{self.where}: the lease was taken over while this process held it ({holder}); its "
                        "work may be mixed with the other's: rerun once that one has ended"
                    )
                    return
                self._write(create=False)
            except StorageError:
                continue  # a passing network error; the next renewal tries again

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if (self._read() or {}).get("token") == self.mine["token"]:
            self.storage.remove(self.relpath)


def _holder(path: Path) -> str:
    """Who holds a local lock, as its holder wrote it in the lock file."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        text = ""
    return text if text.startswith("process ") and "\n" not in text else "another process"


def _pid_namespace() -> int | None:
    """This process's PID namespace (Linux), or None: containers that share a host name may not share it."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def _expired(lease: dict[str, Any]) -> bool:
    """A lease is gone when its process on this host, in this PID namespace, no longer runs (a lease that
    names no namespace, from before they were recorded, is probed by host alone; one whose namespace this
    process cannot compare is not probed), or when nobody renewed it in time. Two machines of one host name
    outside containers share the initial namespace's number, as they shared the host name before."""
    pid = lease.get("pid")
    same_host = lease.get("host") == socket.gethostname()
    seen = lease.get("pidns") in (None, _pid_namespace())  # another container's pids are not ours to probe
    if same_host and seen and isinstance(pid, int) and not _alive(pid):
        return True
    try:
        return time.time() - float(lease.get("renewed", 0)) > LEASE_SECONDS
    except (TypeError, ValueError):
        return True
