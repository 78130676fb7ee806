"""LongTinyStories written by a language model behind any OpenAI-compatible server (``--backend openai``).

``backend`` holds the command-line options and the build; ``recipe`` the prompts, ``story`` one story's
requests, ``runner`` many stories at once, ``client`` the requests with retries and limits, ``cache``,
``ledger`` and ``filters`` the answers, their cost and the quality checks. Imported only for that backend:
it needs the ``llm`` extra (``openai``).
"""
