"""LongTinyStories: the built-in story engine (``engine/``) and the language-model backend (``llm/``), with
what both share: per-story seeding and targets (``plan``), the vocabulary, the variety statistics and the
build plan (``build``). This package imports nothing heavy."""
