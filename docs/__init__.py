"""The reference's generated pages (``python -m docs.params``); not part of the wheel."""
