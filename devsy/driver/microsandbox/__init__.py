"""The built-in MicroSandbox driver: each workspace is a microVM run by the `msb` CLI (PyPI `microsandbox` wheel)."""
