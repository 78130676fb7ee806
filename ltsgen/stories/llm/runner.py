"""Run story pipelines concurrently on an event loop, feeding the shard jobs of ``ltsgen.build``.

The build driver runs shard jobs one after another; each job waits for its stories while the loop already
writes the next jobs' stories, so ``concurrency`` requests stay in flight across shard boundaries. Stories
are independent pipelines of requests, so their results, and the shards, do not depend on timing.

A story the filters reject is written again as a new attempt (its own seed words, facts and request seed),
up to ``max_attempts`` tries, so that a build holds every story unless one fails every attempt.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from ltsgen.build import Job, ShardOutput
from ltsgen.stories.llm.client import Answer, BudgetExhausted, ChatClient
from ltsgen.stories.llm.filters import Filters
from ltsgen.stories.llm.recipe import StorySeed
from ltsgen.stories.llm.story import Recipe, StoryResult, write_story

LOOKAHEAD = 2  # stories scheduled per worker beyond the job being written


class StoryRunner:
    """``with StoryRunner(...) as runner: run_build(spec with run_job=runner.write_shard)``.

    ``make_chat(on_answer, on_retry)`` builds the ``ChatClient`` inside the loop's thread; it is closed on
    exit. The first fatal
    error (``BuildError``, ``BudgetExhausted``) of any story stops every job at once.
    """

    def __init__(
        self,
        make_chat: Callable[[Callable[[Answer, bool], None], Callable[[str, float], None]], ChatClient],
        seed_of: Callable[[int, int], StorySeed],
        recipe: Recipe,
        filters: Filters,
        jobs: list[Job],
        concurrency: int,
        max_attempts: int = 1,
        progress: bool = True,
    ) -> None:
        self.make_chat = make_chat
        self.seed_of = seed_of  # (story index, attempt) -> StorySeed
        self.max_attempts = max_attempts
        self.recipe = recipe
        self.filters = filters
        self.jobs = jobs
        self.positions = {job.key: position for position, job in enumerate(jobs)}
        self.concurrency = concurrency
        self.progress = progress
        self.next_position = 0
        self.words = 0
        self.chat: ChatClient | None = None
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._futures: dict[int, asyncio.Future[list[StoryResult]]] = {}
        self._scheduled: set[int] = set()
        self._queue: asyncio.Queue[tuple[int, asyncio.Future[list[StoryResult]]] | None] | None = None
        self._failed: asyncio.Future[None] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._started = 0.0

    def __enter__(self) -> StoryRunner:
        from tqdm import tqdm

        self._thread.start()
        self.bar = tqdm(
            total=sum(len(job.payload["indices"]) for job in self.jobs),
            unit=" stories",
            disable=not self.progress,
            dynamic_ncols=True,
        )
        self._call(self._start())
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:  # the jobs after the last one run were finished by an earlier run
            self.bar.update(sum(len(job.payload["indices"]) for job in self.jobs[self.next_position :]))
        try:
            self._call(self._stop(graceful=exc_type is not None and issubclass(exc_type, BudgetExhausted)))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()
            self.loop.close()
            self.bar.close()

    def write_shard(self, job: Job, output: ShardOutput) -> dict[str, Any]:
        """The build driver's ``run_job``: wait for the job's stories, write the kept ones, return stats."""
        position = self.positions[job.key]
        # jobs the driver skipped were finished by an earlier run
        skipped = [i for kept in self.jobs[self.next_position : position] for i in kept.payload["indices"]]
        self.bar.update(sum(1 for index in skipped if index not in self._scheduled))
        self.next_position = position + 1
        indices = job.payload["indices"]
        ahead = (later.payload["indices"] for later in self.jobs[position + 1 :])
        results = self._call(self._results(indices, ahead, skipped))
        kept = [attempts[-1].record for attempts in results if attempts[-1].record is not None]
        if kept:
            with output.open(job.key) as writer:
                for record in kept:
                    writer.write(record)
        return shard_stats(results)

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def _start(self) -> None:
        self.chat = self.make_chat(self._on_answer, self._on_retry)
        self._queue = asyncio.Queue()
        self._failed = self.loop.create_future()
        self._started = time.monotonic()
        self._workers = [asyncio.create_task(self._work()) for _ in range(self.concurrency)]

    async def _stop(self, graceful: bool) -> None:
        """Cancel the workers, or (``graceful``, after the budget ran out) let the requests in flight
        finish into the cache: each worker stops when its story needs an uncached answer or ends."""
        if graceful:
            for _ in self._workers:
                self._queue.put_nowait(None)
        else:
            for worker in self._workers:
                worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        if self._failed.done():
            self._failed.exception()  # retrieved: it was raised to the build already
        if self.chat is not None:
            await self.chat.client.close()

    async def _results(
        self, indices: list[int], ahead: Iterator[list[int]], skipped: list[int]
    ) -> list[list[StoryResult]]:
        """The job's stories; meanwhile the next jobs' stories are scheduled until ``LOOKAHEAD``
        stories per worker wait to be written or consumed, so that no worker idles at a job's end."""
        for index in skipped:  # scheduled ahead for a job that turned out to be finished already
            if index in self._futures:
                self._futures.pop(index).cancel()
        self._schedule(indices)
        for upcoming in ahead:
            if len(self._futures) >= LOOKAHEAD * self.concurrency:
                break
            self._schedule(upcoming)
        results = []
        for index in indices:
            future = self._futures.pop(index)
            await asyncio.wait([future, self._failed], return_when=asyncio.FIRST_COMPLETED)
            if self._failed.done():
                self._failed.result()
            results.append(future.result())
        return results

    def _schedule(self, indices: list[int]) -> None:
        for index in indices:
            if index not in self._scheduled:
                self._scheduled.add(index)
                self._futures[index] = self.loop.create_future()
                self._queue.put_nowait((index, self._futures[index]))

    async def _work(self) -> None:
        while True:
            item = await self._queue.get()
            if item is None or self._failed.done():
                return
            index, future = item
            if future.cancelled():  # its job was finished by an earlier run
                continue
            attempts: list[StoryResult] = []
            try:
                while len(attempts) < self.max_attempts and (not attempts or attempts[-1].record is None):
                    story = self.seed_of(index, len(attempts))
                    attempts.append(await write_story(story, self.chat, self.recipe, self.filters))
            except Exception as error:  # the first failure stops the build
                if not self._failed.done():
                    self._failed.set_exception(error)
                return
            if not future.cancelled():
                future.set_result(attempts)
            self.words += attempts[-1].record["num_words"] if attempts[-1].record else 0
            self.bar.update(1)

    def _on_answer(self, answer: Answer, cached: bool) -> None:
        self.bar.set_postfix_str(self._postfix(), refresh=False)

    def _on_retry(self, reason: str, delay: float) -> None:
        """Shown at once: a long wait (a server's Retry-After, say) is not a hang."""
        self.bar.set_postfix_str(f"{self._postfix()} (last: {reason}, retrying in {delay:,.0f} s)")

    def _postfix(self) -> str:
        ledger = self.chat.ledger
        rate = ledger.sent.completion_tokens / max(time.monotonic() - self._started, 1e-9)
        return f"{self.words:,} words, {rate:,.0f} tok/s, {ledger.total_retries} retries"


def shard_stats(results: list[list[StoryResult]]) -> dict[str, Any]:
    """A shard's statistics as sums and maxima that merge across shards (see ``ltsgen.stories.build.merge_stats``):
    ``results`` holds each story's attempts, the last one kept unless every attempt was rejected."""
    from ltsgen.stories.statistics import add_story
    from ltsgen.stories.variety import split_sentences

    stats: dict[str, Any] = {"stories": 0, "words": 0, "target_words": 0, "within_10pct": 0}
    stats |= {
        "chapters": 0,
        "continuations": 0,
        "cut_words": 0,
        "oov_share_sum": 0.0,
        "max_length_error": 0.0,
    }
    stats |= {"rejected": Counter(), "finish_reasons": Counter(), "features": Counter()}
    stats |= {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "attempts": 0, "gave_up": 0}
    for attempts in results:
        stats["attempts"] += len(attempts)
        for result in attempts:
            for key, value in result.usage.to_dict().items():
                stats[key] += value
            stats["finish_reasons"].update(result.finish_reasons)
            if result.record is None:
                stats["rejected"][result.rejected] += 1
        result = attempts[-1]
        if result.record is None:
            stats["gave_up"] += 1
            continue
        meta, words, target = result.record["meta"], result.record["num_words"], result.seed.target_words
        error = abs(words - target) / target
        stats["stories"] += 1
        stats["words"] += words
        stats["target_words"] += target
        stats["within_10pct"] += error <= 0.10
        stats["max_length_error"] = max(stats["max_length_error"], round(error, 4))
        stats["chapters"] += len(meta["chapters"])
        stats["continuations"] += sum(chapter["continuations"] for chapter in meta["chapters"])
        stats["cut_words"] += sum(chapter["cut_words"] for chapter in meta["chapters"])
        stats["oov_share_sum"] += meta["oov_share"]
        stats["features"].update(meta["features"])
        add_story(stats, result.record, result.seed.index, Counter(split_sentences(result.record["text"])))
    return {key: dict(value) if isinstance(value, Counter) else value for key, value in stats.items()}
