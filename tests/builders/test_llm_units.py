"""The pieces of the LLM backend: recipe, prompts, filters, cache, ledger, retry and rate-limit rules."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections import Counter

from ltsgen.stories.llm.cache import ResponseCache, request_key
from ltsgen.stories.llm.client import Answer, RateLimiter, RetryPolicy, retry_after_seconds
from ltsgen.stories.llm.filters import Filters, cue_span, missed_events, oov_share, repeated_share
from ltsgen.stories.llm.ledger import Ledger, Prices, Usage, dataset_ledger
from ltsgen.stories.llm.recipe import (
    EXACT_WORDS,
    FEATURE_INSTRUCTIONS,
    MAX_EVENTS_PER_CHAPTER,
    PLAIN_STORY,
    Outline,
    chapter_messages,
    clean_answer,
    continue_messages,
    cut_to_budget,
    is_refusal,
    outline_messages,
    parse_outline,
    story_seed,
    summary_messages,
)
from ltsgen.stories.vocabulary import ADJECTIVES, NOUNS, VERBS


def test_story_seed_is_deterministic_and_tinystories_shaped():
    seeds = [story_seed(i, 7, 500, 32_000, 600) for i in range(200)]
    assert seeds == [story_seed(i, 7, 500, 32_000, 600) for i in range(200)]
    assert len({s.request_seed for s in seeds}) == 200
    for s in seeds:
        assert s.noun in NOUNS and s.verb in VERBS and s.adjective in ADJECTIVES
        assert 1 <= len(s.features) <= 3 and set(s.features) <= set(FEATURE_INSTRUCTIONS)
        assert 500 <= s.target_words <= 32_000
        assert sum(s.budgets) == s.target_words and max(s.budgets) - min(s.budgets) <= 1
        assert s.chapters == max(1, round(s.target_words / 600))
    assert max(s.chapters for s in seeds) >= 40


def test_attempts_and_planted_facts_of_a_story_seed():
    first, second = story_seed(5, 1, 3000, 9000, 600), story_seed(5, 1, 3000, 9000, 600, attempt=1)
    assert first.target_words == second.target_words and first.budgets == second.budgets
    assert first.request_seed != second.request_seed and (first.noun, first.facts) != (
        second.noun,
        second.facts,
    )
    for story in (story_seed(i, 2, 1000, 32_000, 600) for i in range(40)):
        values = [fact.value for fact in story.facts]
        assert len(set(values)) == len(values)
        load = Counter()
        for fact in story.facts:
            chapters = (fact.plant, *fact.recalls)
            assert (
                list(chapters) == sorted(set(chapters))
                and len(chapters) >= 2
                and chapters[-1] <= story.chapters
            )
            assert len(fact.texts) == len(chapters) and all(fact.value in text for text in fact.texts)
            # the key is asked for before the value, at the plant and at every recall
            assert all(fact.cue in text.partition(fact.value)[0] for text in fact.texts)
            assert fact.name == f"planted_{fact.kind}"
            load.update(chapters)
        assert len({(fact.kind, fact.cue) for fact in story.facts}) == len(story.facts), "keys unique"
        assert max(load.values(), default=0) <= MAX_EVENTS_PER_CHAPTER
        for k in range(1, story.chapters + 1):
            events = story.events(k)
            prompt = chapter_messages(story, Outline((), ("",) * story.chapters), k, "", "")[1]["content"]
            assert "Characters:" not in prompt and "This chapter is about" not in prompt  # no outline answer
            if events:
                pairs = ", ".join(f"{fact.cue} -> {fact.value}" for fact, _ in events)
                assert EXACT_WORDS + pairs + " (" in prompt
                # and again in the prompt's last sentence, which a small model follows best
                values = " and ".join(fact.value for fact, _ in events)
                assert prompt.endswith(f" words, with the words {values}. {PLAIN_STORY}")
            else:
                assert EXACT_WORDS not in prompt and prompt.endswith(f" words. {PLAIN_STORY}")
        if story.facts:
            assert "These things must happen in the story:" in outline_messages(story)[1]["content"]


def test_cue_span_finds_the_key_just_before_a_value():
    text = "They saw the old gate and 951 there. " + "Tom ran. " * 30 + "The Old Gate said 951."
    second = text.rindex("951")
    assert cue_span(text, "the old gate", text.index("951"), 0) == [9, 21]
    assert cue_span(text, "the old gate", second, text.index("951") + 3) == [
        text.index("The Old Gate"),
        second - 6,
    ]
    far = "the old gate " + "x " * 120 + "951"  # 240 characters back: too far
    assert cue_span(far, "the old gate", far.index("951"), 0) is None
    # the cue of a recall comes after the value's previous occurrence
    assert cue_span("the old gate 951 and 951", "the old gate", 21, 16) is None


def test_missed_events_of_a_planted_fact():
    spans = [(0, 100), (102, 200), (202, 300)]
    assert missed_events([10, 150, 250], spans, 1, (2, 3)) == 0
    assert missed_events([150, 250], spans, 1, (2, 3)) == 1  # not planted where the outline put it
    assert missed_events([10, 250], spans, 1, (2, 3)) == 1  # a recall left out
    assert missed_events([], spans, 2, (3,)) == 2


def test_prompts_never_grow_with_the_story():
    story = next(s for s in (story_seed(i, 0, 30_000, 32_000, 600) for i in range(50)) if s.chapters >= 50)
    outline = Outline(
        tuple(f"- Name{i}: " + "word " * 30 for i in range(6)), ("plan " * 40,) * story.chapters
    )
    long_text = "Tom ran to the park and saw a big dog. " * 400  # 3,600 words
    sizes = []
    for k in (2, 10, story.chapters):
        sizes.append(len(chapter_messages(story, outline, k, long_text, long_text)[1]["content"]))
        sizes.append(len(continue_messages(story, outline, k, long_text, 300, True)[1]["content"]))
    sizes.append(len(summary_messages(story, long_text, " ".join(long_text.split()[:900]))[1]["content"]))
    assert max(sizes) < 9_000  # about 2,000 tokens, whatever the story's length
    last = chapter_messages(story, outline, story.chapters, "", "")[1]["content"]
    assert "This is the last chapter: end the story." in last
    assert f"about {story.budgets[-1]} words" in last


def test_outline_prompt_asks_for_our_budgets_and_parse_outline_reads_answers():
    story = story_seed(3, 0, 1000, 3000, 600)
    prompt = outline_messages(story)[1]["content"]
    for k, words in enumerate(story.budgets, 1):
        assert f"Chapter {k} (about {words} words):" in prompt
    answer = (
        "CHARACTERS:\n- Lily: a girl who likes red.\n* Max: her dog.\n"
        "OUTLINE:\n**Chapter 1 (about 500 words):** Lily finds a key.\nChapter 3: They go home.\nChapter 9: x"
    )
    outline = parse_outline(answer, 3)
    assert outline.characters == ("- Lily: a girl who likes red.", "* Max: her dog.")
    assert outline.plans == ("Lily finds a key.", "", "They go home.")
    assert parse_outline("I am not sure.", 2) == Outline((), ("", ""))


def test_clean_answer_and_refusals():
    assert (
        clean_answer("## Chapter 2: The Park\n\nTom ran.\n  \n\n  Lily   sat.  ") == "Tom ran.\n\nLily sat."
    )
    assert clean_answer("Title: Fun Day\nTom ran.") == "Tom ran."
    assert is_refusal("I'm sorry, but I can't write that.") and is_refusal("As an AI, I cannot")
    assert not is_refusal("Tom was sorry he broke the cup.")


def test_an_overlong_chapter_is_cut_at_the_sentence_end_nearest_its_budget():
    text = 'Tom ran. He saw a big dog!\n\n"Hi, dog," said Tom. The dog sat down and wagged'
    assert cut_to_budget(text, 5, 17) == text  # within the most words: kept whole
    assert cut_to_budget(text, 10, 16) == 'Tom ran. He saw a big dog!\n\n"Hi, dog," said Tom.'
    assert cut_to_budget(text, 5, 7) == "Tom ran. He saw a big dog!"  # 7 words, nearer 5 than 2
    assert cut_to_budget(text, 3, 7) == "Tom ran."
    assert cut_to_budget(text, 1, 1) == "Tom"  # no sentence ends within the most words
    story = " ".join(f"Sentence {i} has five words." for i in range(60))  # 300 words
    for budget, most in ((100, 120), (37, 44), (250, 299)):
        cut = cut_to_budget(story, budget, most)
        assert story.startswith(cut) and cut.endswith(".") and len(cut.split()) <= most
        assert abs(len(cut.split()) - budget) <= 2  # five-word sentences: an end is 2 words away at most


def test_filters_measure_vocabulary_repetition_and_length():
    assert oov_share("Lily saw a dog. Lily was happy.") == 0.0  # names are not counted
    assert oov_share("Tom didn\u2019t see Lily\u2019s dog.") == oov_share("Tom didn't see Lily's dog.") == 0.0
    assert oov_share("The magnificent dog ran.") == 0.25
    paragraph = "Tom and Lily went to the park to play ball."
    assert repeated_share(f"{paragraph}\n\n{paragraph}\n\nShort one.\n\nShort one.") == 0.5
    filters = Filters(length_tolerance=0.2, max_oov_share=0.1, max_repeated_share=0.0)
    assert filters.verdict("Tom ran. " * 50, 100)[0] is None
    assert filters.verdict("Tom ran. " * 50, 200)[0] == "length"
    assert filters.verdict("Tom saw an enormous elephant. " * 20, 100)[0] == "vocabulary"
    assert filters.verdict(f"{paragraph}\n\n{paragraph}", 20)[0] == "repetition"


def test_response_cache_is_keyed_by_content(tmp_path):
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": 1, "temperature": 0.8}
    reordered = {"temperature": 0.8, "seed": 1, "messages": [{"content": "hi", "role": "user"}], "model": "m"}
    assert request_key(request) == request_key(reordered)
    assert request_key(request) != request_key({**request, "seed": 2})
    cache = ResponseCache(tmp_path)
    key = request_key(request)
    assert cache.get(key) is None
    cache.put(key, request, {"text": "hello", "finish_reason": "stop"})
    assert cache.get(key) == {"text": "hello", "finish_reason": "stop"} and len(cache) == 1
    assert not list(tmp_path.rglob("*.tmp"))
    cache.path(key).write_text('{"answer": ')  # unreadable: a miss, overwritten by the next answer
    assert cache.get(key) is None


def test_ledger_prices_and_dataset_totals():
    prices = Prices(input_per_million=2.5, output_per_million=10.0)
    ledger = Ledger(prices)
    ledger.sent.add(1000, 500)
    ledger.cached.add(4000, 2000)
    ledger.retry("429")
    ledger.retry("429")
    assert ledger.spent == (2.5 * 1000 + 10 * 500) / 1e6
    assert "1 requests sent" in ledger.summary() and "retries: 2 429" in ledger.summary()
    total = Usage()
    total.merge(ledger.sent.to_dict())
    total.merge(ledger.cached.to_dict())
    assert dataset_ledger(total, prices)["cost_usd"] == round((2.5 * 5000 + 10 * 2500) / 1e6, 6)


def test_retry_after_headers_and_backoff():
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < retry_after_seconds({"retry-after": date}) <= 30
    assert retry_after_seconds({"retry-after": "soon"}) is None and retry_after_seconds({}) is None
    policy = RetryPolicy(backoff=1.0, max_backoff=8.0)
    for attempt, cap in ((0, 1.0), (1, 2.0), (2, 4.0), (5, 8.0)):
        delays = [policy.delay(attempt, None) for _ in range(200)]
        assert 0.5 * cap <= min(delays) and max(delays) < 1.5 * cap and len(set(delays)) > 100
    assert policy.delay(0, 30.0) == 30.0  # Retry-After wins over a shorter backoff


def test_rate_limiter_spaces_units_out():
    async def spend() -> list[float]:
        limiter = RateLimiter(per_minute=1200)  # one unit every 0.05 s
        stamps = []
        for amount in (1, 1, 4, 1):
            await limiter.acquire(amount)
            stamps.append(time.monotonic())
        return stamps

    stamps = asyncio.run(spend())
    # each acquire waits for the units spent before it (a late wake-up never lets the next one go early
    # against the schedule, whatever the gap to the previous one on a busy machine)
    since_first = [stamp - stamps[0] for stamp in stamps]
    assert since_first[1] >= 0.045 and since_first[2] >= 0.095 and since_first[3] >= 0.295


def test_counts_beyond_what_a_request_allows_are_taken_at_its_limit_cached_or_not():
    """Before: a server's (or an old cache entry's) 10**15 tokens were trusted: --tokens-per-minute waited for
    ages and the ledger spent billions."""
    from ltsgen.stories.llm.client import _cached_answer

    entry = {"text": "hi", "finish_reason": "stop", "prompt_tokens": 10**15, "completion_tokens": 10**15}
    assert _cached_answer(entry, 2_000, 250) == Answer("hi", "stop", 2_000, 250)
    assert (
        _cached_answer({**entry, "prompt_tokens": 12, "completion_tokens": 3}, 2_000, 250).prompt_tokens == 12
    )
    assert (
        _cached_answer({**entry, "completion_tokens": -1}, 2_000, 250) is None
    )  # stored unchecked: asked again
