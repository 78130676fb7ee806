"""Real corpora into length buckets: readers per source layout (``readers``, ``inputs``), the tokenize /
bucket / evaluation-set build (``pipeline``, ``spool``, ``buckets``) behind ``ltsgen buckets``."""
