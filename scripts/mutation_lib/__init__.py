"""The curated mutation check (see scripts/mutation_check.py and docs/testing.md)."""
