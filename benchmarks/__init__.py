"""gpuparam's benchmark suite: ``python -m benchmarks [--device cpu|cuda] [--quick]``.

Every figure is measured in the same run on the same machine (ratios are never taken against a
remembered number); peers that are not installed, and gpuparam features that are not present
yet, are reported as ``{"skipped": reason}`` entries, never faked. See ``__main__.py``.
"""
