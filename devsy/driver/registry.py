"""Provider name -> driver, through the provider table. The runner asks for a driver by the name on the record."""

from __future__ import annotations

from collections.abc import Mapping

from devsy.driver.base import Driver
from devsy.driver.provider_table import DEFAULT_PROVIDER, row_for

__all__ = ["DEFAULT_PROVIDER", "backend_pulls_images", "make_driver", "network_mode_of", "validate_provider"]


def validate_provider(name: str, options: Mapping[str, str]) -> None:
    """Check the provider name and its options before anything is created (only that provider's parser runs)."""
    row = row_for(name)
    row.executable_for(name)  # `external:` alone names no executable
    row.parse_options(options)


def make_driver(name: str, options: Mapping[str, str], *, connect: bool = True) -> Driver:
    """The driver of `--provider name`; `connect` opens its backend now so an unusable one fails before any state."""
    row = row_for(name)
    driver = row.make(name, options, row.parse_options(options))
    if connect and row.connects_early:
        # Launch/contact the backend now (BackendUnavailable, a provider's Info, msb's version), before any state.
        driver.open_backend()
    return driver


def network_mode_of(name: str, options: Mapping[str, str]) -> str:
    """The network mode image builds on the host engine should use for this provider."""
    row = row_for(name)
    return row.network_mode(row.parse_options(options))


def backend_pulls_images(name: str) -> bool:
    """Whether this provider's backend pulls registry images itself, so the host's Docker engine must not."""
    return row_for(name).pulls_registry_images
