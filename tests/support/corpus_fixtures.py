"""The real corpus samples of tests/fixtures/ as the corpora, buckets and tokenizer tests read them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

C4_JSONL = "c4_en/c4-train.00000-of-01024.first400.jsonl"
C4_GZ = "c4_en/c4-train.00000-of-01024.first400.json.gz"
ARXIV = "arxiv_redpajama/arxiv.first5.jsonl"
CODE = "code_debian_standin/debian_source_code.sample.jsonl.gz"
TINY_EOT = "tinystories/tinystories_sample_eot.txt"


def json_lines(path: Path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_pile_zst(path: Path, real_data: Path) -> tuple[int, int]:
    """A real Pile-layout .jsonl.zst: the code sample as 'Github', the arXiv sample as 'ArXiv'."""
    import zstandard

    code = json_lines(real_data / CODE)
    arxiv = json_lines(real_data / ARXIV)
    lines = []
    for rows, name in ((code, "Github"), (arxiv, "ArXiv")):
        for row in rows:
            lines.append(json.dumps({"text": row["text"], "meta": {"pile_set_name": name}}) + "\n")
    # the arXiv records interleaved into the code ones, as the Pile mixes its subsets
    mixed = lines[: len(code)]
    for i, line in enumerate(lines[len(code) :]):
        mixed.insert(i * 30, line)
    path.write_bytes(zstandard.ZstdCompressor(level=3).compress("".join(mixed).encode("utf-8")))
    return len(code), len(arxiv)
