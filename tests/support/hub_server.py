"""A local HTTP server on 127.0.0.1 that speaks the part of the Hugging Face Hub's HTTP API that
``huggingface_hub.HfFileSystem`` uses to read a dataset repository, serving folders of this machine.

It is not the Hub: it knows dataset repositories only, one revision each (``main``, or the commit id it
reports), no authentication, no Xet storage (files are served plainly, as the Hub serves small files).
What it serves, with the Hub's paths and shapes:

- ``GET /api/datasets/{repo}`` and ``/api/datasets/{repo}/revision/{revision}``: the repository's info
  (its id and commit ``sha``); an unknown repository or revision is a 404 with the Hub's
  ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``);
- ``GET /api/datasets/{repo}/tree/{revision}[/{path}]`` (``recursive``): the folder's entries
  (``type``, ``path``, ``size``, ``oid``);
- ``GET`` / ``HEAD /datasets/{repo}/resolve/{revision}/{path}``: the file, with ``Range`` (206), and the
  ``ETag``, ``X-Repo-Commit`` and ``Content-Length`` headers that downloads check.

Every request is recorded in ``requests`` (method, path, its ``Range`` header or ``None``); one it does not
serve in ``unserved`` (and is answered 404), so a test can show that the client needed nothing more
(a read-only client sends only ``GET``, ``HEAD`` and ``POST``).

With ``upload_root``, it also takes what ``HfApi.create_repo`` and ``upload_folder`` send for files
committed inline (``POST /api/repos/create``, ``.../preupload/{revision}``, ``.../commit/{revision}``),
writing each repository under ``upload_root``; LFS and Xet uploads are not served.

``HubServer.start({"org/name": folder})`` serves in a thread; ``env`` points a ``huggingface_hub`` client
process at it (``HF_ENDPOINT``, online, no token, an empty cache); ``stop()`` ends it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import tempfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import yaml
from http_server import serving_thread

REVISION = "main"


def _git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repository:
    """A folder served as a dataset repository at one commit."""

    def __init__(self, repo_id: str, folder: Path) -> None:
        self.repo_id = repo_id
        self.files = {
            path.relative_to(folder).as_posix(): path for path in sorted(folder.rglob("*")) if path.is_file()
        }
        self.oids = {name: _git_blob_oid(path.read_bytes()) for name, path in self.files.items()}
        listing = json.dumps(sorted(self.oids.items())).encode()
        self.sha = hashlib.sha1(repo_id.encode() + listing).hexdigest()
        self.folders = {
            "/".join(name.split("/")[:depth])
            for name in self.files
            for depth in range(1, name.count("/") + 1)
        }

    def knows(self, revision: str) -> bool:
        return unquote(revision) in (REVISION, self.sha)

    def entry(self, path: str) -> dict | None:
        if path in self.files:
            return {
                "type": "file",
                "path": path,
                "size": self.files[path].stat().st_size,
                "oid": self.oids[path],
            }
        if path in self.folders:
            return {
                "type": "directory",
                "path": path,
                "size": 0,
                "oid": hashlib.sha1(path.encode()).hexdigest(),
            }
        return None

    def tree(self, folder: str, recursive: bool) -> list[dict] | None:
        if folder and folder not in self.folders:
            return None
        prefix = f"{folder}/" if folder else ""
        names = sorted(
            name for name in self.folders | set(self.files)
            if name.startswith(prefix) and (recursive or "/" not in name[len(prefix) :])
        )  # fmt: skip
        return [self.entry(name) for name in names]

    def info(self) -> dict:
        return {
            "_id": self.sha[:24],
            "id": self.repo_id,
            "author": self.repo_id.split("/")[0],
            "sha": self.sha,
            "private": False,
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "lastModified": "2026-01-01T00:00:00.000Z",
            "siblings": [{"rfilename": name} for name in self.files],
        }


class HubServer:
    def __init__(self, repositories: dict[str, Path], upload_root: Path | None = None) -> None:
        self.upload_root = upload_root  # where uploaded repositories are written; None: read-only
        self.repositories = {
            repo_id: Repository(repo_id, Path(folder)) for repo_id, folder in repositories.items()
        }
        self.requests: list[tuple[str, str, str | None]] = []
        self.unserved: list[tuple[str, str]] = []
        self.cache = tempfile.TemporaryDirectory(prefix="ltsgen-hub-cache-")
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.env = {
            "HF_ENDPOINT": self.endpoint,
            "HF_HUB_OFFLINE": "0",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
            "HF_HOME": self.cache.name,
            "HF_TOKEN": "",
        }
        self._thread = serving_thread(self.httpd, name="hub-server")

    def serve(self, repo_id: str, folder: Path) -> None:
        """Serve ``folder`` as the dataset repository ``repo_id`` from now on."""
        self.repositories[repo_id] = Repository(repo_id, Path(folder))

    @classmethod
    def start(cls, repositories: dict[str, Path], upload_root: Path | None = None) -> HubServer:
        server = cls(repositories, upload_root)
        server._thread.start()
        return server

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join()
        self.cache.cleanup()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                server._serve(self, "HEAD")

            def do_GET(self) -> None:
                server._serve(self, "GET")

            def do_POST(self) -> None:
                server._serve(self, "POST")

        return Handler

    # ------------------------------------------------------------------ routing

    def _serve(self, request: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(request.path)
        self.requests.append((method, url.path, request.headers.get("Range")))
        parts = [unquote(part) for part in url.path.strip("/").split("/")]
        query = parse_qs(url.query)
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        if method == "POST" and self._upload(request, parts, body):
            return
        if parts[:2] == ["api", "datasets"] and len(parts) >= 4:
            repo = self._repository(request, "/".join(parts[2:4]))
            if repo is None:
                return
            rest = parts[4:]
            if not rest or (rest[0] == "revision" and len(rest) == 2):
                if rest and not self._revision(request, repo, rest[1]):
                    return
                return self._json(request, repo.info())
            if rest[0] == "tree" and len(rest) >= 2 and method == "GET":
                if not self._revision(request, repo, rest[1]):
                    return
                entries = repo.tree(
                    "/".join(rest[2:]), query.get("recursive", ["false"])[0].lower() == "true"
                )
                if entries is None:
                    return self._error(request, 404, "EntryNotFound", "no such folder")
                return self._json(request, entries)
        if (
            parts[:1] == ["datasets"]
            and len(parts) >= 6
            and parts[3] == "resolve"
            and method in ("GET", "HEAD")
        ):
            repo = self._repository(request, "/".join(parts[1:3]))
            if repo is None or not self._revision(request, repo, parts[4]):
                return
            return self._file(request, repo, "/".join(parts[5:]), method)
        self.unserved.append((method, request.path))
        self._error(request, 404, "EntryNotFound", "not served here")

    def _upload(self, request, parts: list[str], body: bytes) -> bool:
        """The write side ``HfApi.create_repo`` and ``upload_folder`` use, for a repository of
        ``upload_root``: create (a new empty folder there), preupload (every file "regular", so that its
        bytes come inline in the commit) and commit (each file written, the repository re-read: a new
        commit ``sha``). False for a request it does not serve."""
        if self.upload_root is None:
            return False
        if parts == ["api", "validate-yaml"]:  # the card's header must be a YAML mapping, as the Hub reads it
            content = json.loads(body)["content"]
            header = content.split("---\n")[1] if content.startswith("---\n") else ""
            try:
                valid = isinstance(yaml.safe_load(header), dict)
            except yaml.YAMLError:
                valid = False
            if valid:
                self._json(request, {"errors": [], "warnings": []})
            else:
                self._json(request, {"errors": [{"message": "the YAML header is not a mapping"}]}, status=400)
            return True
        if parts == ["api", "repos", "create"]:
            payload = json.loads(body)
            repo_id = "/".join(filter(None, [payload.get("organization"), payload["name"]]))
            if repo_id not in self.repositories:
                (self.upload_root / repo_id).mkdir(parents=True, exist_ok=True)
                self.serve(repo_id, self.upload_root / repo_id)
            self._json(request, {"url": f"{self.endpoint}/datasets/{repo_id}"})
            return True
        if parts[:2] != ["api", "datasets"] or len(parts) != 6 or parts[4] not in ("preupload", "commit"):
            return False
        repo = self._repository(request, "/".join(parts[2:4]))
        if repo is None or not self._revision(request, repo, parts[5]):
            return True
        if parts[4] == "preupload":
            files = [
                {"path": item["path"], "uploadMode": "regular", "shouldIgnore": False}
                for item in json.loads(body)["files"]
            ]
            self._json(request, {"files": files, "commitOid": repo.sha})
            return True
        folder = self.upload_root / repo.repo_id
        for line in body.splitlines():
            item = json.loads(line)
            if item["key"] == "file":
                target = folder / item["value"]["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(base64.b64decode(item["value"]["content"]))
            elif item["key"] != "header":
                self._error(request, 400, "BadRequest", f"{item['key']} is not served here")
                return True
        self.serve(repo.repo_id, folder)
        sha = self.repositories[repo.repo_id].sha
        self._json(request, {"commitUrl": f"{self.endpoint}/datasets/{repo.repo_id}/commit/{sha}",
                             "commitOid": sha, "pullRequestUrl": None})  # fmt: skip
        return True

    def _repository(self, request, repo_id: str) -> Repository | None:
        repo = self.repositories.get(repo_id)
        if repo is None:
            self._error(request, 404, "RepoNotFound", f"Repository {repo_id} not found")
        return repo

    def _revision(self, request, repo: Repository, revision: str) -> bool:
        if repo.knows(revision):
            return True
        self._error(request, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return False

    # ------------------------------------------------------------------ answers

    def _file(self, request, repo: Repository, path: str, method: str) -> None:
        if path not in repo.files:
            return self._error(request, 404, "EntryNotFound", f"{path} does not exist on {REVISION}")
        data = repo.files[path].read_bytes()
        status, start, end = 200, 0, len(data)
        headers = {"ETag": f'"{repo.oids[path]}"', "X-Repo-Commit": repo.sha, "Accept-Ranges": "bytes"}
        wanted = request.headers.get("Range")
        if wanted and wanted.startswith("bytes="):
            first, _, last = wanted[len("bytes=") :].partition("-")
            if first:
                start, end = int(first), min(len(data), int(last) + 1 if last else len(data))
            else:  # a suffix: the last N bytes
                start = max(0, len(data) - int(last))
            if start >= len(data) and len(data):
                return self._send(request, 416, b"", {"Content-Range": f"bytes */{len(data)}"})
            status = 206
            headers["Content-Range"] = f"bytes {start}-{max(start, end - 1)}/{len(data)}"
        self._send(request, status, data[start:end], headers, head=method == "HEAD")

    def _json(self, request, value, status: int = 200) -> None:
        self._send(request, status, json.dumps(value).encode(), {"Content-Type": "application/json"})

    def _error(self, request, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self._send(request, status, body, {"Content-Type": "application/json", "X-Error-Code": code,
                                           "X-Error-Message": message})  # fmt: skip

    @staticmethod
    def _send(request, status: int, body: bytes, headers: dict[str, str], head: bool = False) -> None:
        request.send_response(status)
        for name, value in headers.items():
            request.send_header(name, value)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        if not head:
            request.wfile.write(body)
