"""Helpers shared by the tests (fixtures live in conftest.py files; these are plain modules)."""
