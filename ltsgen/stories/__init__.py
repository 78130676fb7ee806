"""LongTinyStories: the built-in story engine (``engine``, ``plan``, ``vocabulary``, ``variety``) and the LLM
backend. Import the submodules you need; this package imports nothing heavy."""
