"""Helpers the tests import (fixtures live in tests/conftest.py): the CLI runner, projects, engine objects."""
