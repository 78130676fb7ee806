"""Variety statistics of story text: how far a set of stories is from reading as a template.

Definitions (the same for generated stories and for the real TinyStories reference):

- **words** for n-grams: the text lowercased, split on whitespace, with punctuation split off as its own
  token is *not* done; instead every word is stripped of surrounding punctuation (``"Hi,`` -> ``hi``) and
  tokens left empty are dropped. N-grams never cross a story boundary.
- **distinct-n**: unique n-grams / total n-grams, pooled over the stories (the first ``max_words`` words
  when given, so that two corpora are compared at the same size: distinct-n falls as a sample grows).
- **sentences**: each line is split at ``.``, ``!`` or ``?`` (optionally followed by a closing quote) when
  whitespace and then an upper-case letter or an opening quote follow. ``"Hi!" said Sam.`` is one sentence.
  Sentences are compared exactly (case and punctuation kept).
- **repeated-sentence share**: over all stories, the sentences that repeat an earlier sentence *of the same
  story*, divided by all sentences.
- **max repeats**: the largest number of times one sentence of 6 or more words occurs inside one story.
- **top-4-gram share**: the share of all 4-gram occurrences (over the same first ``max_words`` words as
  distinct-n) that the 1,000 most frequent 4-grams cover: how much of the text is stock phrases.
- **cross-story reuse**: over the sentences of 6 or more words of a set of stories (each occurrence
  counted), the share whose sentence also occurs in another story of the set.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

LONG_SENTENCE_WORDS = 6
TOP_NGRAMS = 1000  # the most frequent 4-grams whose share of the text is reported

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"“])|(?<=[.!?][\"”])\s+(?=[A-Z\"“])")
_STRIP = "\"'“”‘’.,!?;:()[]-—…*"
# Paragraph openings that start a new story in a blank-line-separated TinyStories dump.
_STORY_OPENINGS = ("Once upon a time", "Once there was", "Once there were", "Once, there")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (see the module docstring); newlines always end a sentence."""
    sentences = []
    for line in text.splitlines():
        if line.strip():
            sentences.extend(part for part in _SENTENCE_END.split(line.strip()) if part)
    return sentences


def words_of(text: str) -> list[str]:
    """Lowercased words stripped of surrounding punctuation, as used for distinct-n."""
    stripped = (word.strip(_STRIP) for word in text.lower().split())
    return [word for word in stripped if word]


def variety_stats(texts: Iterable[str], max_words: int | None = None) -> dict:
    """Distinct-2/3 and the top-4-gram share (pooled, over the first ``max_words`` words when given),
    repeated-sentence share and the max repeats of a 6+ word sentence inside one story. See the module
    docstring for definitions."""
    seen2: set[tuple[str, str]] = set()
    seen3: set[tuple[str, str, str]] = set()
    fourgrams: Counter[tuple[str, str, str, str]] = Counter()
    total2 = total3 = words_used = 0
    stories = sentences = repeated = max_repeats = 0
    for text in texts:
        stories += 1
        counts = Counter(split_sentences(text))
        sentences += sum(counts.values())
        repeated += sum(count - 1 for count in counts.values())
        long_counts = [c for s, c in counts.items() if s.count(" ") + 1 >= LONG_SENTENCE_WORDS]
        max_repeats = max([max_repeats, *long_counts])
        if max_words is not None and words_used >= max_words:
            continue
        words = words_of(text)
        if max_words is not None:
            words = words[: max_words - words_used]
        words_used += len(words)
        bigrams = list(zip(words, words[1:], strict=False))
        trigrams = list(zip(words, words[1:], words[2:], strict=False))
        seen2.update(bigrams)
        seen3.update(trigrams)
        fourgrams.update(zip(words, words[1:], words[2:], words[3:], strict=False))
        total2 += len(bigrams)
        total3 += len(trigrams)
    total4 = sum(fourgrams.values())
    return {
        "stories": stories,
        "words": words_used,
        "distinct_2": len(seen2) / total2 if total2 else 0.0,
        "distinct_3": len(seen3) / total3 if total3 else 0.0,
        "top_4gram_share": sum(n for _, n in fourgrams.most_common(TOP_NGRAMS)) / total4 if total4 else 0.0,
        "sentences": sentences,
        "repeated_sentence_share": repeated / sentences if sentences else 0.0,
        "max_repeats_6plus": max_repeats,
    }


def long_sentences(counts: Mapping[str, int]) -> dict[str, int]:
    """The sentences of 6 or more words of one story's sentence counts."""
    return {s: c for s, c in counts.items() if s.count(" ") + 1 >= LONG_SENTENCE_WORDS}


def cross_story_reuse(stories: Iterable[Mapping[object, int]]) -> dict:
    """Cross-story reuse from each story's counts of its 6+ word sentences (or of any keys standing for
    them, such as hashes): ``{"stories", "sentences", "reused", "share"}``."""
    owners: dict[object, int] = {}
    shared: set[object] = set()
    counted: list[Mapping[object, int]] = []
    for number, counts in enumerate(stories):
        counted.append(counts)
        for sentence in counts:
            if owners.setdefault(sentence, number) != number:
                shared.add(sentence)
    total = sum(sum(counts.values()) for counts in counted)
    reused = sum(c for counts in counted for s, c in counts.items() if s in shared)
    return {
        "stories": len(counted),
        "sentences": total,
        "reused": reused,
        "share": reused / total if total else 0.0,
    }


def reuse_of_texts(texts: Iterable[str]) -> dict:
    """``cross_story_reuse`` of whole story texts."""
    return cross_story_reuse(long_sentences(Counter(split_sentences(text))) for text in texts)


def tinystories_stories(path: str | Path) -> Iterator[str]:
    """Stories of a TinyStories text file: split at ``<|endoftext|>`` lines when the file has them, else
    (a blank-line-separated dump, whose story boundaries are lost) a new story starts at each paragraph that
    opens with "Once upon a time" / "Once there was"; other paragraphs join the story before them, so a few
    merged stories make the within-story repetition of the reference slightly higher, never lower."""
    text = Path(path).read_text(encoding="utf-8")
    if "<|endoftext|>" in text:
        yield from (story.strip() for story in text.split("<|endoftext|>") if story.strip())
        return
    story: list[str] = []
    for paragraph in text.split("\n\n"):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if story and paragraph.startswith(_STORY_OPENINGS):
            yield "\n\n".join(story)
            story = []
        story.append(paragraph)
    if story:
        yield "\n\n".join(story)


def reference_stats(path: str | Path, max_words: int | None = None) -> dict:
    """``variety_stats`` of the real TinyStories stories in ``path`` (see ``tinystories_stories``)."""
    return variety_stats(tinystories_stories(path), max_words=max_words)


def reference_reuse(path: str | Path, stories: int | None = None) -> dict:
    """``cross_story_reuse`` of the first ``stories`` real TinyStories stories in ``path`` (all if None)."""
    return reuse_of_texts(list(tinystories_stories(path))[:stories])
