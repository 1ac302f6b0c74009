"""Importing paramiko quickly. Every SSH session is a fresh process on both ends, so import time is per command."""

from __future__ import annotations

import os
import sys
import types


def import_paramiko() -> types.ModuleType:
    """`import paramiko`, without the two imports it does not need here."""
    # paramiko imports invoke only to run `Match exec` lines of ssh_config files, which devsy never reads; it treats
    # a failed import as "feature unavailable". Marking it absent saves ~70 ms (and the agent does not bundle it).
    sys.modules.setdefault("invoke", None)  # type: ignore[arg-type]
    # paramiko/__init__ reads its own version through importlib.metadata, whose import costs ~50 ms in the guest
    # (email, zipfile, pathlib, ...). A stand-in answers from the dist-info directory name for the duration of the
    # import; code that imports importlib.metadata later gets the real module.
    stub_installed = "importlib.metadata" not in sys.modules
    if stub_installed:
        stub = types.ModuleType("importlib.metadata")
        stub.version = dist_version  # type: ignore[attr-defined]
        sys.modules["importlib.metadata"] = stub
    try:
        import paramiko
    finally:
        if stub_installed:
            del sys.modules["importlib.metadata"]
    return paramiko


def dist_version(name: str) -> str:
    """The version of distribution `name` from its `<name>-<version>.dist-info` directory on sys.path."""
    prefix = name.lower().replace("-", "_") + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for candidate in names:
            if candidate.lower().startswith(prefix) and candidate.endswith(".dist-info"):
                return candidate[len(prefix):-len(".dist-info")]
    return "0"
