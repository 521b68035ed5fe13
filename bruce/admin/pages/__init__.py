"""The admin page's groups, one class each with its ``routes()``; ``AdminServer`` mounts them
behind its gate. Each takes what it reads (a store, the job book, a folder) and ``page``, the
template renderer, in its constructor.

``logs`` (tool executions, live), ``llm`` (model calls, usage, budget), ``turns`` (one turn's
trace), ``jobs``, ``pairing``, ``memory``, ``artifacts``, ``chat`` (the web chat's page),
``metrics`` (Prometheus), ``evals`` (``bruce eval``'s runs). ``rendering`` and ``listing`` are
what they share: templates and redirects; the list API's filters and cursor.
"""
