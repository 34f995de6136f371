"""gpuparam's benchmark suite: ``python -m benchmarks [--device cpu|cuda] [--quick]``.

Every figure is measured in the same run on the same machine (ratios are never taken against a
remembered number); peers that are not installed are reported as ``{"skipped": reason}``
entries, never faked. What is measured is data (``config.py``); ``__main__.py`` runs it and
writes one JSON file, which ``report.py`` turns into the docs' tables.
"""
