"""Host-wide tables over the snapshots' symbol indexes (worker/repos/symbols.py): what one
query can answer for every repo at once."""
