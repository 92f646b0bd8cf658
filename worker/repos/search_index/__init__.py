"""The search index: which files of a snapshot can match a pattern, so that `search` reads only
those (docs/search-index.md)."""
