"""A small scriptable OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

It answers ``POST /v1/chat/completions`` deterministically from the request content (the same request
always gets the same answer), and injects faults on demand, one per arriving request, in order:

    "429"        rate limited, with ``Retry-After`` (seconds, ``retry_after`` attribute)
    "500"        internal server error
    "slow"       hold the request past the client's timeout, then drop it without an answer
    "malformed"  status 200 with a body that is not JSON
    "html"       status 200 with an HTML page (a proxy's, or a web UI at the wrong URL)
    "list"       a normal answer whose ``content`` is a list of parts, not text
    "no-counts"  a normal answer whose ``usage`` gives no token counts (``null``)
    "huge-counts" a normal answer whose ``usage`` counts 10**15 prompt and completion tokens
    "length"     a normal answer cut after a few words, ``finish_reason="length"``

With ``api_key`` set, a request without ``Authorization: Bearer <api_key>`` gets 401; an unknown
``model`` gets 404. ``answered`` counts the 200 answers per request key, so a test can assert that no
request was ever answered twice. ``hold_after(n)`` answers n requests, then parks every later one until
``drop_held()``, which closes them unanswered (a crash test kills the client meanwhile).

Answers follow the prompts of ``ltsgen.stories.llm.recipe``: an outline request gets a character sheet and
one line per chapter; a summary request a short summary; a chapter request about the number of words it
asks for, cut (``finish_reason="length"``) at ``max_tokens`` words. Usage counts one token per word.

Run standalone (for benchmarks): ``python tests/support/openai_server.py --latency 0.05``; it prints its base URL.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from http_server import serving_thread

MODEL = "scripted-model"
FAULTS = ("429", "500", "slow", "malformed", "html", "list", "no-counts", "huge-counts", "length", "surrogate",
          "odd-finish")  # fmt: skip
WORDS = (
    "the a little big red blue happy sad girl boy dog cat bird tree ball park sun moon friend mom dad "
    "ran jumped played saw looked said smiled laughed found gave went came home day night box toy cake "
    "and then but so they she he it was is very good nice kind glad fast slow tall small soft warm"
).split()
NAMES = ("Lily", "Tom", "Max", "Sue", "Ben", "Mia", "Sam", "Zoe")


def request_key(body: dict[str, Any]) -> str:
    """The identity of a request: a hash of its whole JSON body."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def scripted_text(key: str, words: int) -> str:
    """``words`` simple words in sentences and paragraphs, a pure function of ``key``."""
    digest = hashlib.sha256(key.encode()).digest()
    out, sentence, paragraph = [], [], []
    for i in range(words):
        byte = digest[i % len(digest)] ^ (i * 131 % 251)
        sentence.append(WORDS[(byte + i * 7) % len(WORDS)])
        if len(sentence) == 8 or i == words - 1:
            paragraph.append(" ".join(sentence).capitalize() + ".")
            sentence = []
            if len(paragraph) == 5 or i == words - 1:
                out.append(" ".join(paragraph))
                paragraph = []
    return "\n\n".join(out)


EXACT_WORDS = re.compile(r"Write these words exactly as they are: ([^\n]+) \([^\n]*\)\.\n")
FAILURES = ("omit", "hard words", "refuse")  # and "uncued" (the values without their keys), when asked
HARD_WORDS = "Meanwhile the magnificent extraordinary philosophical conversation continued indefinitely."


def scripted_answer(
    body: dict[str, Any], key: str, fail_share: float = 0.0, failures: tuple[str, ...] = FAILURES
) -> str:
    """What the scripted model says to a recipe prompt."""
    prompt = body["messages"][-1]["content"]
    if "CHARACTERS:" in prompt:
        chapters = [int(n) for n in re.findall(r"^Chapter (\d+)", prompt, flags=re.M)]
        sheet = "\n".join(f"- {name}: a {WORDS[(i * 5) % 40]} friend." for i, name in enumerate(NAMES[:2]))
        lines = "\n".join(f"Chapter {n}: {scripted_text(f'{key}-{n}', 7)}" for n in chapters)
        return f"CHARACTERS:\n{sheet}\nOUTLINE:\n{lines}"
    if "summary" in prompt.lower():
        return scripted_text(key, 30)
    chapter = re.search(r"chapter (\d+) of \d+", prompt)  # a chapter and its continuations fail alike
    digest = hashlib.sha256(f"fail-{body.get('seed')}-{chapter and chapter.group(1)}".encode()).digest()
    failure = failures[digest[1] % len(failures)] if digest[0] / 256 < fail_share else None
    if failure == "refuse":
        return "I'm sorry, but I cannot write that story."
    if failure == "hard words":
        return " ".join([HARD_WORDS] * 8)
    asked = re.search(r"about (\d+) words", prompt)
    text = scripted_text(key, int(asked.group(1)) if asked else 100)
    exact = EXACT_WORDS.search(prompt)
    if exact and failure != "omit":
        paragraphs = text.split("\n\n")
        for number, pair in enumerate(exact.group(1).split(", ")):
            cue, _, word = pair.partition(" -> ")
            said = word if failure == "uncued" else f"{cue} and {word}"
            paragraphs[number % len(paragraphs)] += f" They saw {said} there."
        text = "\n\n".join(paragraphs)
    return text


class ScriptedOpenAIServer:
    """An OpenAI-compatible server in a background thread; ``with`` starts and stops it."""

    def __init__(
        self,
        api_key: str | None = None,
        model: str = MODEL,
        latency: float = 0.0,
        slow_seconds: float = 2.0,
        retry_after: float = 0.1,
        fail_share: float = 0.0,
        failures: tuple[str, ...] = FAILURES,
    ) -> None:
        self.api_key = api_key
        self.fail_share = fail_share
        self.failures = failures
        self.model = model
        self.latency = latency
        self.slow_seconds = slow_seconds
        self.retry_after = retry_after
        self.faults: deque[str] = deque()
        self.answered: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.arrivals: list[tuple[float, str, str]] = []  # (monotonic time, request key, outcome)
        self.lock = threading.Lock()
        self._hold_after: int | None = None
        self._admitted = 0  # requests let through to be answered
        self._released = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self._thread = serving_thread(self.httpd)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.drop_held()
        self.httpd.shutdown()
        self.httpd.server_close()

    def fault(self, *names: str) -> None:
        """Queue faults; each arriving request takes the next one."""
        unknown = set(names) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}")
        with self.lock:
            self.faults.extend(names)

    def hold_after(self, answers: int) -> None:
        """Let ``answers`` requests in total through to an answer, then park every later one until ``drop_held``."""
        self._hold_after = answers
        self._released.clear()

    def drop_held(self) -> None:
        """Close parked requests unanswered and answer normally from now on."""
        self._hold_after = None
        self._released.set()

    @property
    def requests(self) -> int:
        """Chat requests that reached the server, answered or not."""
        with self.lock:
            return len(self.arrivals)

    @property
    def total_answered(self) -> int:
        with self.lock:
            return sum(self.answered.values())

    def handle(self, headers: Any, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes | None]:
        """Return (status, headers, body); a ``None`` body means close the connection unanswered.
        An answer counts in ``answered`` once it was written (``delivered``)."""
        key = request_key(body)
        refusal = None
        if self.api_key is not None and headers.get("Authorization") != f"Bearer {self.api_key}":
            refusal = self._error(401, "invalid_api_key", "Incorrect API key provided.")
        elif body.get("model") != self.model:
            refusal = self._error(404, "model_not_found", f"The model {body.get('model')!r} does not exist.")
        with self.lock:
            fault = self.faults.popleft() if self.faults and refusal is None else None
            hold = refusal is None and self._hold_after is not None and self._admitted >= self._hold_after
            outcome = str(refusal[0]) if refusal else fault or ("held" if hold else "ok")
            self._admitted += outcome in ("ok", "length", "no-counts", "huge-counts")
            self.outcomes[outcome] += 1
            self.arrivals.append((time.monotonic(), key, outcome))
        if refusal:
            return refusal
        if hold:
            self._released.wait()
            return 0, {}, None
        if fault == "429":
            return self._error(
                429, "rate_limit_exceeded", "Slow down.", {"Retry-After": str(self.retry_after)}
            )
        if fault == "500":
            return self._error(500, "server_error", "The server had an error.")
        if fault == "slow":
            time.sleep(self.slow_seconds)
            return 0, {}, None
        if fault == "malformed":
            return 200, {"Content-Type": "application/json"}, b'{"id": "chatcmpl-broken", "choices": [{'
        if fault == "html":
            return 200, {"Content-Type": "text/html"}, b"<html><body>Bad Gateway</body></html>"
        time.sleep(self.latency)
        text = scripted_answer(body, key, self.fail_share, self.failures)
        finish: Any = "stop"
        limit = 5 if fault == "length" else body.get("max_tokens") or body.get("max_completion_tokens")
        words = list(re.finditer(r"\S+", text))
        if limit and len(words) > limit:
            text, finish = text[: words[limit - 1].end()], "length"
        if fault == "surrogate":  # a lone surrogate, escaped in the JSON: no UTF-8 spells it
            text += " \ud83d"
        if fault == "odd-finish":
            finish = 1
        prompt_tokens = sum(len(m["content"].split()) for m in body["messages"])
        completion_tokens = len(text.split())
        if fault == "huge-counts":
            prompt_tokens = completion_tokens = 10**15
        content: Any = [{"type": "text", "text": text}] if fault == "list" else text
        counted = fault != "no-counts"
        answer = {
            "id": f"chatcmpl-{key[:24]}",
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens if counted else None,
                "completion_tokens": completion_tokens if counted else None,
                "total_tokens": prompt_tokens + completion_tokens if counted else None,
            },
        }
        return 200, {"Content-Type": "application/json", "X-Request-Key": key}, json.dumps(answer).encode()

    def delivered(self, key: str) -> None:
        with self.lock:
            self.answered[key] += 1

    def _error(
        self, status: int, code: str, message: str, extra: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        error = {"error": {"message": message, "type": code, "code": code, "param": None}}
        return status, {"Content-Type": "application/json", **(extra or {})}, json.dumps(error).encode()


def _handler(server: ScriptedOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path.rstrip("/").endswith("/models"):
                data = {"object": "list", "data": [{"id": server.model, "object": "model", "owned_by": "me"}]}
                self._send(200, {"Content-Type": "application/json"}, json.dumps(data).encode())
            else:
                self._send(404, {"Content-Type": "application/json"}, b'{"error": {"message": "not found"}}')

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"Content-Type": "application/json"}, b'{"error": {"message": "not found"}}')
                return
            try:
                body = json.loads(raw)
            except ValueError:  # a client killed while sending
                self.close_connection = True
                return
            status, headers, payload = server.handle(self.headers, body)
            if payload is None:
                self.close_connection = True
                return
            try:
                self._send(status, headers, payload)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                return
            if status == 200 and "X-Request-Key" in headers:
                server.delivered(headers["X-Request-Key"])

        def _send(self, status: int, headers: dict[str, str], payload: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def stories_args(server: ScriptedOpenAIServer, out: Path, cache: Path, *extra: str) -> list[str]:
    """``ltsgen stories`` arguments for 8 stories through ``server``, with its answers cached in ``cache``."""
    return [
        "stories",
        "--backend", "openai",
        "--base-url", server.base_url,
        "--model", MODEL,
        "--out", str(out),
        "--cache-dir", str(cache),
        "--num-stories", "8",
        "--seed", "3",
        "--min-words", "150",
        "--max-words", "1200",
        "--chapter-words", "300",
        "--max-tokens", "250",  # shorter than a chapter: answers end with finish_reason=length
        "--samples-per-shard", "2",
        "--splits", "train=1.0",
        "--concurrency", "3",
        "--retry-backoff", "0.01",
        "--request-timeout", "30",
        "--input-price", "2",
        "--output-price", "8",
        "--no-progress",
        *extra,
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve scripted chat completions on 127.0.0.1.")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument(
        "--fail-share", type=float, default=0.0, help="share of chapter answers that fail filters"
    )
    args = parser.parse_args()
    with ScriptedOpenAIServer(model=args.model, latency=args.latency, fail_share=args.fail_share) as server:
        print(server.base_url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
