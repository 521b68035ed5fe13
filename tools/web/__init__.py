"""The web tools' machinery: reading a page, and searching the web through a pluggable backend.

* ``tools/web/page.py``: ``read_url`` fetches one http(s) URL, following redirects by hand so
  that the SSRF guard (:mod:`tools.netguard`) checks every hop.
* ``tools/web/extract.py``: a fetched page's title and readable text (trafilatura), in a
  worker process.
* ``tools/web/search.py``: ``web_search`` over a ``SearchBackend`` (DuckDuckGo via ``ddgs``,
  a SearxNG instance, or the Brave Search API).
* ``tools/web/client.py``: what both send and how both read a body within a size limit.

The ``web.read_url`` and ``web.search`` contracts over these are in ``tools/web_tools.py``.
"""
