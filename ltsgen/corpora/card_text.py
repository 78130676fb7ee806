"""What the data card of a bucket build says (``manifest.extra["card"]``), per source."""

from __future__ import annotations

from typing import Any

SOURCE_CARDS: dict[str, dict[str, Any]] = {
    "c4": {
        "name": "C4 (English)",
        "license": "odc-by",
        "source_datasets": ["allenai/c4"],
        "about": "web text from Common Crawl, cleaned by the C4 filters (Raffel et al. 2020; AllenAI release)",
    },
    "redpajama-arxiv": {
        "name": "arXiv (RedPajama layout)",
        "license": "other",
        "source_datasets": ["togethercomputer/RedPajama-Data-1T"],
        "about": "LaTeX bodies of arXiv papers (preamble and comments removed); each paper keeps its own licence",
    },
    "pile": {  # a layout: the Pile's own files, or others laid out like them (the code sample's are)
        "name": "jsonl in the Pile's layout",
        "license": "other",
        "source_datasets": [],
        "about": "documents in the Pile's jsonl layout (text, meta), the Pile's or others'; licences follow each "
        "document's source",
    },
    "stack": {
        "name": "The Stack (source code)",
        "license": "other",
        "source_datasets": ["bigcode/the-stack"],
        "about": "permissively licensed source files (content, lang, repository) from The Stack",
    },
    "hf": {
        "name": "Hugging Face dataset",
        "license": "other",
        "source_datasets": [],
        "about": "a streamed dataset",
    },
    "text": {"name": "Plain text", "license": "other", "source_datasets": [], "about": "plain text files"},
}


def bucket_card(
    source: str, dataset: str, command: str, lengths: list[int], eval_lengths: list[int]
) -> dict[str, Any]:
    """The ``card`` entry of a bucket build's manifest (see ``ltsgen.card``)."""
    info = SOURCE_CARDS[source]
    buckets = ", ".join(f"[{lo}, {hi})" for lo, hi in zip([0, *lengths], [*lengths, "inf"], strict=True))
    return {
        "pretty_name": f"{info['name']}, length-bucketed ({dataset})",
        "license": info["license"],
        "language_creators": "found",
        "annotations_creators": "no-annotation",
        "source_datasets": info["source_datasets"],  # none named: found text of the user's, not "original"
        "tags": ["long-context", "length-extrapolation", "tokenized"],
        "command": command,
        "summary": (
            f"Real documents ({info['about']}) tokenized and cut by token count into the buckets {buckets}, "
            f"with exact-length evaluation sets at {', '.join(map(str, eval_lengths)) or 'no lengths'} tokens."
        ),
        "motivation": (
            "Length-extrapolation research trains at one context length and evaluates at longer ones (FIRE "
            "trains on C4 at 2,048 tokens and evaluates from 512 to 8,192; KERPLE and Sandwich use arXiv and "
            "GitHub up to 16,384). Length buckets let a run draw training documents of chosen lengths, and the "
            "evaluation sets give sequences of exactly L tokens cut from single documents."
        ),
        "collection": (
            "The input files were streamed in order; empty and invalid UTF-8 documents were counted and "
            "skipped, exact duplicates (same sha1 of the text) removed, the rest tokenized with the tokenizer "
            "below. Evaluation documents were drawn first, longest length first, in an order fixed by a hash of "
            "the seed and the document id, and reused at every shorter length, so the sequence at L is a prefix "
            "of the same document's sequence at 2L (`eval/<L>/`, record `meta.document_id`); "
            "`eval_concat/<L>/`, when present, cuts the held-out documents joined by the end-of-text token into "
            "windows of L tokens. Evaluation documents never appear in the training buckets; their ids are in "
            "`manifest.json` under `extra.eval.documents`. The other documents went to a split by a hash of "
            "their id and to the bucket [lo, hi) holding their token count. Record ids are "
            "`<source>-<first 16 hex digits of sha1(text)>`; the source's own fields are in `meta`."
        ),
        "uses": "Training and evaluating language models across context lengths; long-context data loaders.",
        "limitations": (
            "The documents are as found in the source, with its biases, errors and personal data; only exact "
            "duplicates were removed. Long-document buckets and long evaluation lengths hold few documents when "
            "the input is small (see the tables). Evaluation sequences are cut at a token boundary, so their "
            "text may end inside a word; `input_ids` is the exact sequence."
        ),
    }
