"""``ltsgen stories --backend openai`` end to end: the real openai client against a scripted local server."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest
from openai_server import MODEL, ScriptedOpenAIServer, stories_args
from process_tools import free_port, wait_until

from ltsgen.cli import main
from ltsgen.loaders.contract import read_manifest
from ltsgen.outputs import STATE_PATH
from ltsgen.stories.llm.cache import ResponseCache
from ltsgen.stories.llm.recipe import RECIPE_VERSION, clean_answer, story_seed

REPO = Path(__file__).resolve().parents[2]


def cache_entries(cache: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(cache.glob("*/*.json"))]


def read_records(out: Path) -> list[dict]:
    from ltsgen.loaders.formats import read_shard

    manifest = read_manifest(out)
    return [r for shard in manifest.shards("train") for r in read_shard(out / shard.path, manifest.format)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """One build of ``stories_args`` through a server that stays up for the module, as (server, out, cache,
    requests answered): the build that a killed one must equal, and whose cache the library reads."""
    root = tmp_path_factory.mktemp("llm-reference")
    with ScriptedOpenAIServer() as server:
        assert main(stories_args(server, root / "out", root / "cache")) == 0
        yield server, root / "out", root / "cache", server.total_answered


def dataset_files(out: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(out)): path.read_bytes()
        for path in sorted(out.rglob("*"))
        if path.is_file() and ".ltsgen" not in path.parts
    }


def check_planted_facts(record: dict, seed) -> int:
    """The record's planted facts are the seed's, first written in their plant chapter and again in each
    recall chapter, with distances that match the text; returns the number of recalls."""
    from ltsgen.stories.recalls import occurrences

    text = record["text"]
    chapters = text.split("\n\n")  # the scripted model writes one paragraph per 40 words: find by offset
    facts = {fact["value"]: fact for fact in record["meta"]["facts"]}
    asked = {fact.value: fact for fact in seed.facts if fact.plant <= len(record["meta"]["chapters"])}
    assert set(facts) == set(asked)
    recalls = 0
    for fact in facts.values():
        found = occurrences(text, fact["value"])
        assert [fact["first"], *fact["uses"]] == found and fact["planted"]
        assert fact["name"] == asked[fact["value"]].name == f"planted_{asked[fact['value']].kind}"
        # the scripted model writes the key right before each value: every use is a cued recall
        cue = asked[fact["value"]].cue
        for use, (start, end) in zip(fact["uses"], fact["cues"], strict=True):
            assert text[start:end].lower() == cue.lower() and 0 <= use - end <= 200
        for use, chars, words in zip(
            fact["uses"], fact["distance_chars"], fact["distance_words"], strict=True
        ):
            previous = max(offset for offset in found if offset < use)
            assert chars == use - previous and words == len(text[:use].split()) - len(text[:previous].split())
        recalls += len(fact["uses"])
    assert chapters
    return recalls


def test_stories_through_faults_with_ledger_and_no_repeated_request(tmp_path, capsys):
    with ScriptedOpenAIServer(slow_seconds=1.5, retry_after=0.3) as server:
        server.fault("429", "500", "slow", "malformed", "length")
        args = stories_args(server, tmp_path / "out", tmp_path / "cache", "--request-timeout", "1")
        assert main(args) == 0
        printed = capsys.readouterr().out
        assert "retries: 1 429, 1 500, 1 malformed, 1 timeout" in printed

        # every request was answered once, and each answer is in the cache
        assert max(server.answered.values()) == 1
        entries = cache_entries(tmp_path / "cache")
        assert len(entries) == server.total_answered == len(server.answered)
        # the 429 was retried no sooner than its Retry-After, the slow request after the timeout
        for fault, wait in (("429", 0.3), ("slow", 1.0)):
            at, key = next((t, k) for t, k, outcome in server.arrivals if outcome == fault)
            retried = next(t for t, k, _ in server.arrivals if k == key and t > at)
            assert retried - at >= wait

        manifest = read_manifest(tmp_path / "out")
        ledger = manifest.extra["llm"]["ledger"]
        prompt = sum(e["answer"]["prompt_tokens"] for e in entries)
        completion = sum(e["answer"]["completion_tokens"] for e in entries)
        assert (ledger["requests"], ledger["prompt_tokens"], ledger["completion_tokens"]) == (
            len(entries),
            prompt,
            completion,
        )
        assert ledger["cost_usd"] == pytest.approx((2 * prompt + 8 * completion) / 1e6)
        assert f"{len(entries)} requests sent" in printed
        assert manifest.extra["llm"]["finish_reasons"]["length"] >= 1
        assert manifest.extra["llm"]["filters"] == {
            "kept": 8,
            "attempts": 8,
            "gave_up": 0,
            "rejected": {
                "empty": 0,
                "length": 0,
                "cue": 0,
                "recall": 0,
                "refusal": 0,
                "repetition": 0,
                "vocabulary": 0,
            },
        }

        records = read_records(tmp_path / "out")
        assert [r["id"] for r in records] == [f"lts-3-{i:08d}" for i in range(8)]
        # the card's variety row: cross-story reuse and repetition of these 8 stories, no n-grams (no text)
        variety = manifest.extra["statistics"]["Variety: this build and real TinyStories at equal size"]
        build, reference = variety["rows"]
        assert build[1] == sum(r["num_words"] for r in records) and build[2:5] == ["-", "-", "-"]
        assert build[5] == 8 and build[6].endswith("%") and reference[5] == "-"
        continued = recalls = cut = 0
        for record in records:
            meta, seed = record["meta"], story_seed(int(record["id"][-8:]), 3, 150, 1200, 300)
            assert meta["target_words"] == seed.target_words
            assert meta["seed_words"] == {"noun": seed.noun, "verb": seed.verb, "adjective": seed.adjective}
            assert len(meta["summaries"]) == len(meta["chapters"]) - 1
            assert sum(c["words"] for c in meta["chapters"]) == record["num_words"]
            assert abs(record["num_words"] - seed.target_words) <= 0.25 * seed.target_words
            continued += sum(c["continuations"] for c in meta["chapters"])
            cut += sum(c["cut_words"] for c in meta["chapters"])
            assert all(c["words"] <= 1.2 * c["budget"] for c in meta["chapters"])
            # every chapter ends at a full sentence, also those cut at --max-tokens
            ends = accumulate(c["words"] for c in meta["chapters"])
            assert all(record["text"].split()[end - 1][-1] in ".!?" for end in ends)
            # the story's first chapter is the model's answer to this story's chapter-1 prompt
            first = next(
                e["answer"]["text"]
                for e in entries
                if e["request"]["seed"] == seed.request_seed
                and "Write chapter 1 now" in e["request"]["messages"][-1]["content"]
            )
            assert record["text"].startswith(clean_answer(first))
            recalls += check_planted_facts(record, seed)
        assert continued >= 1 and recalls >= 8
        length_control = manifest.extra["statistics"]["Length control"]
        assert length_control["words cut from chapters past their budget"] == cut

        # a finished build reruns without a single request
        requests = server.requests
        assert main(args) == 0
        assert server.requests == requests
        assert "nothing to do" in capsys.readouterr().out

        # a half-finished build of an earlier recipe is refused, not resumed with this recipe's stories
        builder = manifest.builder
        assert builder["engine_version"] == f"openai-recipe-{RECIPE_VERSION}"
        (tmp_path / "out" / "manifest.json").unlink()
        (tmp_path / "out" / STATE_PATH).write_text(
            json.dumps({**builder, "engine_version": "openai-recipe-1"})
        )
        assert main(args) == 2
        assert (
            f"(engine_version openai-recipe-1 -> openai-recipe-{RECIPE_VERSION})" in capsys.readouterr().err
        )
        assert server.requests == requests


def test_a_story_whose_recalls_lack_their_cue_is_written_again(tmp_path, capsys):
    # the model writes some chapters' values without the keys the prompt put before them
    with ScriptedOpenAIServer(fail_share=0.15, failures=("uncued",)) as server:
        args = stories_args(server, tmp_path / "out", tmp_path / "cache", "--max-attempts", "12")
        args[args.index("--min-words") + 1] = "600"  # two chapters or more: every story plants facts
        args[args.index("--max-words") + 1] = "1500"
        assert main(args) == 0
    filters = read_manifest(tmp_path / "out").extra["llm"]["filters"]
    rejected = filters["rejected"]
    assert filters["kept"] == 8 and rejected["cue"] >= 1 and sum(rejected.values()) == rejected["cue"]
    assert filters["attempts"] == 8 + rejected["cue"]
    for record in read_records(tmp_path / "out"):
        seed = story_seed(int(record["id"][-8:]), 3, 600, 1500, 300, record["meta"]["attempt"])
        assert record["meta"]["missed_cues"] == 0 and check_planted_facts(record, seed) >= 1
    capsys.readouterr()


def test_exactly_n_stories_when_answers_fail_the_filters_at_random(tmp_path, capsys):
    with ScriptedOpenAIServer(fail_share=0.25) as server:
        args = stories_args(server, tmp_path / "out", tmp_path / "cache", "--max-attempts", "12")
        args[args.index("--min-words") + 1] = "600"  # two chapters or more: every story plants facts
        args[args.index("--max-words") + 1] = "1500"
        assert main(args) == 0
        printed = capsys.readouterr().out
    filters = read_manifest(tmp_path / "out").extra["llm"]["filters"]
    records = read_records(tmp_path / "out")
    assert len(records) == filters["kept"] == 8 and filters["gave_up"] == 0
    rejected = filters["rejected"]
    assert filters["attempts"] == 8 + sum(rejected.values()) and filters["attempts"] > 8
    assert rejected["recall"] and rejected["refusal"]
    assert f"filters: 8 of 8 stories kept after {filters['attempts']} attempts" in printed
    retried = [r for r in records if r["meta"]["attempt"] > 0]
    assert retried
    for record in records:  # each kept story is its last attempt's, with that attempt's facts
        attempt = record["meta"]["attempt"]
        seed = story_seed(int(record["id"][-8:]), 3, 600, 1500, 300, attempt)
        assert seed.facts
        assert record["meta"]["seed_words"]["noun"] == seed.noun
        check_planted_facts(record, seed)
        assert record["meta"]["missed_recalls"] == 0


def test_a_story_that_fails_every_attempt_is_counted_and_named(tmp_path, capsys):
    with ScriptedOpenAIServer(fail_share=1.0) as server:
        args = stories_args(server, tmp_path / "out", tmp_path / "cache", "--max-attempts", "2")
        args[args.index("--num-stories") + 1] = "2"
        assert main(args) == 2  # before: 0, for a build of no story
        printed, err = capsys.readouterr()
        assert main(args) == 2  # a rerun has nothing to do, and says the same
        assert capsys.readouterr().err == err
    filters = read_manifest(tmp_path / "out").extra["llm"]["filters"]
    assert filters == {"kept": 0, "attempts": 4, "gave_up": 2, "rejected": filters["rejected"]}
    assert sum(filters["rejected"].values()) == 4
    assert "2 stories rejected at all 2 attempts (--max-attempts)" in printed
    assert err.startswith(
        f"ltsgen stories: error: {tmp_path / 'out'}: no story was kept, every one rejected at all 2"
    )


@pytest.mark.parametrize("fault", ["401", "404"])
def test_bad_key_or_model_stops_at_once_with_one_line(tmp_path, capsys, monkeypatch, fault):
    monkeypatch.setenv("LTS_TEST_KEY", "wrong")
    with ScriptedOpenAIServer(api_key="wrong" if fault == "404" else "right") as server:
        args = stories_args(server, tmp_path / "out", tmp_path / "cache", "--concurrency", "1")
        args += ["--api-key-env", "LTS_TEST_KEY"]
        if fault == "404":
            args[args.index(MODEL)] = "no-such-model"
        assert main(args) == 2
        assert server.requests == 1  # no retry
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"answered {fault}" in err
    assert ("$LTS_TEST_KEY" if fault == "401" else "no-such-model") in err
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_answers_without_counts_or_text_are_estimated_or_retried_and_the_cache_holds_only_checked_ones(
    tmp_path, capsys
):
    with ScriptedOpenAIServer() as server:
        # estimated: no counts, or counts beyond what the request allows (before: trusted, and the token rate
        # limit then waited for ages, silently; the cost went far past --max-cost); an HTML page, a list of
        # parts and a text no UTF-8 spells: retried; a finish reason that is no string: read as "stop" (before,
        # stored so and never read back: asked again on every rerun)
        server.fault("no-counts", "huge-counts", "html", "list", "surrogate", "odd-finish")
        args = stories_args(server, tmp_path / "out", tmp_path / "cache", "--concurrency", "1")
        assert main(args) == 0
        assert "retries: 3 malformed" in capsys.readouterr().out
        entries = cache_entries(tmp_path / "cache")
        counts = [entry["answer"][k] for entry in entries for k in ("prompt_tokens", "completion_tokens")]
        assert all(isinstance(count, int) and 0 <= count < 100_000 for count in counts)
        assert all(isinstance(entry["answer"]["text"], str) for entry in entries)
        assert all(isinstance(entry["answer"]["finish_reason"], str) for entry in entries)
        # an entry an earlier version stored without a count is asked again, not read
        stale = next((tmp_path / "cache").glob("*/*.json"))
        entry = json.loads(stale.read_text())
        stale.write_text(json.dumps({**entry, "answer": {**entry["answer"], "completion_tokens": None}}))
        shutil.rmtree(tmp_path / "out")
        requests = server.requests
        assert main(args) == 0
        assert server.requests == requests + 1
        assert json.loads(stale.read_text())["answer"] == entry["answer"]


@pytest.mark.parametrize(
    ("option", "value", "problem"),
    [
        ("--base-url", "http://127.0.0.1:notaport/v1", "is not a URL (Port could not be cast"),
        ("--base-url", "http://[::1/v1", "is not a URL (Invalid IPv6 URL)"),
        ("--base-url", "127.0.0.1:8080/v1", "is not an http(s) URL with a host"),
        ("--max-oov-share", "-1", "argument --max-oov-share: must be at least 0 (got -1)"),
        ("--max-repeated-share", "1.5", "argument --max-repeated-share: must be at most 1 (got 1.5)"),
        # before: sent, and every request failed on this side (NaN is no JSON), retried for minutes
        ("--temperature", "nan", "argument --temperature: must be a finite number (got nan)"),
        ("--temperature", "-1", "argument --temperature: must be at least 0 (got -1)"),
        ("--top-p", "2", "argument --top-p: must be at most 1 (got 2)"),
        # before: a NaN price turned --max-cost off and wrote NaN into the manifest
        ("--output-price", "nan", "argument --output-price: must be a finite number (got nan)"),
        ("--input-price", "inf", "argument --input-price: must be a finite number (got inf)"),
        ("--max-cost", "-1", "argument --max-cost: must be at least 0 (got -1)"),
        ("--concurrency", "0", "argument --concurrency: must be at least 1 (got 0)"),
        # the client reads it when --base-url is not given: before, unchecked, minutes of retries
        (
            "$OPENAI_BASE_URL",
            "127.0.0.1:8080/v1",
            "$OPENAI_BASE_URL '127.0.0.1:8080/v1' is not an http(s) URL",
        ),
    ],
)
def test_an_option_that_cannot_make_a_build_is_one_line_before_any_request(
    option, value, problem, tmp_path, capsys, monkeypatch
):
    with ScriptedOpenAIServer() as server:
        args = stories_args(server, tmp_path / "out", tmp_path / "cache")
        if option == "$OPENAI_BASE_URL":
            del args[args.index("--base-url") : args.index("--base-url") + 2]
            monkeypatch.setenv("OPENAI_BASE_URL", value)
        elif option in args:
            args[args.index(option) + 1] = value
        else:
            args += [option, value]
        try:
            status = main(args)
        except SystemExit as refused:  # refused while parsing
            status = refused.code
        assert status == 2
        assert server.requests == 0
    err = capsys.readouterr().err
    assert err.startswith("ltsgen stories: error: ") and problem in err and err.count("\n") == 1, err


def test_a_server_that_refuses_connections_is_named_at_once_not_after_every_retry(tmp_path, capsys):
    with ScriptedOpenAIServer() as server:
        args = stories_args(server, tmp_path / "out", tmp_path / "cache", "--retry-backoff", "0.01")
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    args[args.index("--base-url") + 1] = url
    assert main(args) == 2
    err = capsys.readouterr().err
    # before: the full --max-retries (8, minutes of backoff by default) under a bar that did not move
    assert err.startswith(f"ltsgen stories: error: {url}/: cannot connect (") and err.count("\n") == 1, err
    assert "(Connection refused: " in err and "is the server running" in err


def _chat_client(url: str, cache: Path, retries: int, timeout: float | Any = 60.0):
    import openai

    try:
        import httpx2 as httpx  # what openai is built on in its later releases
    except ImportError:
        import httpx

    from ltsgen.stories.llm.client import ChatClient, RetryPolicy, Sampling
    from ltsgen.stories.llm.ledger import Ledger

    fresh = httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0))  # a connection per request
    client = openai.AsyncOpenAI(
        base_url=url, api_key="none", max_retries=0, timeout=timeout, http_client=fresh
    )
    waits: list[tuple[str, float]] = []
    chat = ChatClient(
        client, MODEL, Sampling(), ResponseCache(cache), Ledger(), retry=RetryPolicy(retries, 0.001),
        on_retry=lambda reason, delay: waits.append((reason, delay)),
    )  # fmt: skip
    return chat, waits


def test_a_server_lost_after_it_answered_gets_every_retry(tmp_path):
    import asyncio

    from ltsgen.build import BuildError

    server = ScriptedOpenAIServer().__enter__()
    chat, waits = _chat_client(server.base_url, tmp_path, retries=5)

    async def ask() -> None:
        await chat.complete([{"role": "user", "content": "Write about 5 words, story 1."}], seed=1)
        server.__exit__(None, None, None)  # the server goes away mid-build: a blip, retried in full
        await chat.complete([{"role": "user", "content": "Write about 5 words, story 2."}], seed=1)

    with pytest.raises(BuildError, match=r"gave up after 5 retries; last error: APIConnectionError"):
        asyncio.run(ask())
    assert chat.ledger.retries == {"connection": 5} and [reason for reason, _ in waits] == ["connection"] * 5


def test_a_server_that_never_accepts_is_a_connect_timeout_not_a_request_timeout(tmp_path):
    import asyncio
    import socket

    import openai

    from ltsgen.build import BuildError

    with socket.socket() as listener:  # listens, never accepts: once its backlog is full, connects hang
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        fillers = []
        try:
            while len(fillers) < 8:
                fillers.append(socket.create_connection(listener.getsockname(), timeout=0.5))
        except TimeoutError:
            pass
        chat, waits = _chat_client(url, tmp_path, retries=8, timeout=openai.Timeout(60.0, connect=0.2))

        async def ask() -> None:
            await chat.complete([{"role": "user", "content": "Write about 5 words."}], seed=1)

        # before: each of the 9 attempts waited the whole request timeout, and was retried as a slow answer
        with pytest.raises(BuildError, match=r"cannot connect \(APITimeoutError"):
            asyncio.run(ask())
        for filler in fillers:
            filler.close()
    assert [reason for reason, _ in waits] == ["connection", "connection"]


def test_a_cache_folder_that_cannot_be_used_is_named_not_the_output(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    with ScriptedOpenAIServer() as server:
        assert main(stories_args(server, tmp_path / "out", tmp_path / "afile" / "cache")) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ltsgen stories: error: --cache-dir {tmp_path / 'afile' / 'cache'}: cannot "), err


def test_killed_build_resumes_without_repeating_a_request_and_equals_an_uninterrupted_one(
    uninterrupted, tmp_path
):
    _, reference, _, total = uninterrupted  # the module's build, through another server
    out, cache = tmp_path / "out", tmp_path / "cache"
    with ScriptedOpenAIServer() as server:
        # park every request after 5/6 of them: mid-run, and late enough that a shard is surely finished
        server.hold_after(total * 5 // 6)
        command = [sys.executable, "-m", "ltsgen", *stories_args(server, out, cache)]
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            journal = out / ".ltsgen" / "journal.jsonl"
            wait_until(
                process,
                lambda: (
                    server.total_answered == total * 5 // 6
                    and len(ResponseCache(cache)) == total * 5 // 6
                    and journal.exists()
                    and journal.read_text().count("\n") >= 1
                ),
                timeout=30,
            )
            process.send_signal(signal.SIGKILL)
            assert process.wait(timeout=10) == -signal.SIGKILL
        finally:
            process.kill()
        assert not (out / "manifest.json").exists()
        server.drop_held()

        assert main(stories_args(server, out, cache)) == 0
        assert max(server.answered.values()) == 1
        assert server.total_answered == total
    assert dataset_files(out) == dataset_files(reference)


def test_max_cost_stops_cleanly_and_a_rerun_finishes(tmp_path, capsys):
    out, cache = tmp_path / "out", tmp_path / "cache"
    with ScriptedOpenAIServer() as server:
        prices = ["--input-price", "200", "--output-price", "800", "--max-cost", "1.0"]
        assert main(stories_args(server, out, cache, *prices)) == 3
        spent = sum(
            (200 * e["answer"]["prompt_tokens"] + 800 * e["answer"]["completion_tokens"]) / 1e6
            for e in cache_entries(cache)
        )
        assert 0 < spent <= 1.0
        assert "stopped before spending more than --max-cost $1" in capsys.readouterr().out
        assert not (out / "manifest.json").exists()

        assert main(stories_args(server, out, cache, "--input-price", "200", "--output-price", "800")) == 0
        assert max(server.answered.values()) == 1
        assert read_manifest(out).extra["llm"]["filters"]["kept"] == 8


def test_the_library_builds_what_the_command_builds(uninterrupted, tmp_path):
    """The command's build is the module's; the library reads every answer from its cache."""
    from ltsgen.stories.build import StoryConfig
    from ltsgen.stories.llm.backend import LLMConfig, build_llm_stories

    server, command, cache, answered = uninterrupted
    config = StoryConfig(
        out=tmp_path / "library",
        num_stories=8,
        min_words=150,
        max_words=1200,
        seed=3,
        splits="train=1.0",
        samples_per_shard=2,
    )
    llm = LLMConfig(
        model=MODEL,
        base_url=server.base_url,
        chapter_words=300,
        max_tokens=250,
        concurrency=3,
        input_price=2.0,
        output_price=8.0,
        cache_dir=cache,
    )
    result = build_llm_stories(config, llm, progress=False)
    assert server.total_answered == answered  # every answer came from the shared cache
    assert (result.status, result.samples) == ("built", 8)
    assert dataset_files(tmp_path / "library") == dataset_files(command)
    # the library checks the ranges the command line does, before any request or file
    from ltsgen.errors import UsageError

    with pytest.raises(UsageError, match=r"^--top-p must be at most 1 \(got 2\)$"):
        build_llm_stories(replace(config, out=tmp_path / "bad"), replace(llm, top_p=2), progress=False)
    assert server.total_answered == answered and not (tmp_path / "bad").exists()


def test_requests_per_minute_spaces_requests_at_the_server(tmp_path):
    import asyncio

    import openai

    from ltsgen.stories.llm.client import ChatClient, Sampling
    from ltsgen.stories.llm.ledger import Ledger

    async def ask(url: str) -> ChatClient:
        client = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0)
        chat = ChatClient(
            client, MODEL, Sampling(), ResponseCache(tmp_path), Ledger(), requests_per_minute=600
        )
        prompts = [[{"role": "user", "content": f"Write about 5 words, story {i}."}] for i in range(6)]
        await chat.complete(prompts.pop(), seed=1)  # warms the connection up
        await asyncio.gather(*(chat.complete(messages, seed=1) for messages in prompts))
        await asyncio.gather(*(chat.complete(messages, seed=1) for messages in prompts))  # cached: free
        await client.close()
        return chat

    with ScriptedOpenAIServer() as server:
        chat = asyncio.run(ask(server.base_url))
        times = sorted(t for t, _, _ in server.arrivals)[1:]
    assert len(times) == 5 and (chat.ledger.sent.requests, chat.ledger.cached.requests) == (6, 5)
    assert times[-1] - times[0] >= 0.35, times  # 5 requests at 600 per minute: one each 0.1 s


def test_a_server_that_drops_requests_before_answering_once_gets_every_retry(tmp_path):
    """Connected, then dropped without an answer (a server overloaded at the start, a proxy): not a server
    that is not there, so every retry is made, and the error does not say it cannot connect."""
    import asyncio
    import socket
    import threading

    from ltsgen.build import BuildError

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drop_every_connection() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                connection, _ = listener.accept()
                connection.recv(65536)
                connection.close()  # the request read, no answer

    thread = threading.Thread(target=drop_every_connection, daemon=True)
    thread.start()
    chat, waits = _chat_client(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", tmp_path, retries=4)
    try:
        with pytest.raises(BuildError, match=r"gave up after 4 retries; last error: APIConnectionError"):
            asyncio.run(chat.complete([{"role": "user", "content": "Write about 5 words."}], seed=1))
    finally:
        stop.set()
        thread.join()
        listener.close()
    assert [reason for reason, _ in waits] == ["connection"] * 4
