"""Variety statistics of real TinyStories text, kept as constants so that every data card can compare a
build with them without the reference text at hand.

Provenance: ``tinystories_validation_head.txt`` (794,375 bytes, sha256
``5fc1fb0113df62b567fb271806cd645ce8d75f59c58ca0b764c03d3b6ff34ca6``), the first stories of the Hugging Face
``roneneldan/TinyStories`` validation split (Eldan & Li 2023, CDLA-Sharing-1.0), each written as
``text.strip() + "\\n\\n"``. Computed with ``ltsgen.stories.variety.reference_stats(path, max_words=n)``;
``tests/test_card.py`` recomputes every value from the file.
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

# distinct-n falls as a sample grows, so a build is compared at the same number of words:
# words -> (distinct-2, distinct-3) over the first that many words
TINYSTORIES_DISTINCT = {
    10_000: (0.5318099456412322, 0.8065464126469396),
    20_000: (0.4532044504858279, 0.7425732535739633),
    50_000: (0.37933043967526725, 0.7051364884509772),
    100_000: (0.33124585352124003, 0.6695970251808738),
}


def comparison_size(build_words: int) -> int:
    """The largest reference size a build of ``build_words`` words can be compared at (the smallest if none)."""
    fitting = [size for size in TINYSTORIES_DISTINCT if size <= build_words]
    return max(fitting) if fitting else min(TINYSTORIES_DISTINCT)
