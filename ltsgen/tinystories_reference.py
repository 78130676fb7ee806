"""Variety statistics of real TinyStories text, kept as constants so that every data card can compare a
build with them, at equal size, without the reference text at hand.

Provenance: ``tinystories_validation_head.txt`` (794,375 bytes, sha256
``5fc1fb0113df62b567fb271806cd645ce8d75f59c58ca0b764c03d3b6ff34ca6``; in the repository as
``tests/fixtures/tinystories/``), the first stories of the Hugging Face ``roneneldan/TinyStories``
validation split (Eldan & Li 2023, CDLA-Sharing-1.0), each written as ``text.strip() + "\\n\\n"``.
Computed with ``ltsgen.stories.variety.reference_stats(path, max_words=n)`` and
``reference_reuse(path, stories=n)``; ``tests/builders/test_card.py`` recomputes every value from the file.
"""

from __future__ import annotations

REFERENCE_FILE = "tinystories_validation_head.txt"
REFERENCE_SHA256 = "5fc1fb0113df62b567fb271806cd645ce8d75f59c58ca0b764c03d3b6ff34ca6"

# per-story sentence statistics over the whole file (789 stories)
TINYSTORIES_VARIETY = {
    "stories": 789,
    "sentences": 15223,
    "repeated_sentence_share": 0.009459370689088878,
    "max_repeats_6plus": 8,
}

# n-gram statistics fall as a sample grows, so a build is compared at the same number of words:
# words -> (distinct-2, distinct-3, top-4-gram share) over the first that many words (at most 100,000: a
# larger sample costs a build time and changes no conclusion)
TINYSTORIES_NGRAMS = {
    100: (1.0, 1.0, 1.0),
    200: (0.9191919191919192, 0.9642857142857143, 1.0),
    500: (0.8326612903225806, 0.9451219512195121, 1.0),
    1_000: (0.7328629032258065, 0.9054878048780488, 1.0),
    2_000: (0.6685138539042821, 0.884263959390863, 0.5662404092071611),
    5_000: (0.5805672902836452, 0.8403480372318899, 0.27376348463260736),
    10_000: (0.5318099456412322, 0.8065464126469396, 0.1945521322179147),
    20_000: (0.4532044504858279, 0.7425732535739633, 0.18352136403083363),
    50_000: (0.37933043967526725, 0.7051364884509772, 0.12663312505071816),
    100_000: (0.33124585352124003, 0.6695970251808738, 0.10558072445807853),
}

# cross-story reuse rises with the number of stories compared: first n stories -> reuse share
TINYSTORIES_REUSE = {
    10: 0.0,
    20: 0.014084507042253521,
    50: 0.02586206896551724,
    100: 0.041831097079715863,
    200: 0.0351421188630491,
    500: 0.03755577590480912,
    789: 0.03151862464183381,
}


def _largest_at_most(sizes, value: int) -> int | None:
    fitting = [size for size in sizes if size <= value]
    return max(fitting) if fitting else None


def comparison_words(build_words: int) -> int | None:
    """The reference size (words) a build of ``build_words`` words is compared at: the largest one it
    reaches, so that both sides are measured on exactly that many words; None below the smallest."""
    return _largest_at_most(TINYSTORIES_NGRAMS, build_words)


def comparison_stories(build_stories: int) -> int | None:
    """The number of reference stories the build's cross-story reuse is compared with (the largest count
    not above the build's; all 789 for larger builds); None below the smallest."""
    return _largest_at_most(TINYSTORIES_REUSE, build_stories)
