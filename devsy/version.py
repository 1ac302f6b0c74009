"""The installed devsy version, as providers report it in Info."""

from importlib import metadata


def devsy_version() -> str:
    try:
        return metadata.version("devsy")
    except metadata.PackageNotFoundError:
        return "0+unknown"
