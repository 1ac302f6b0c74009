"""How an external row of the provider table (devsy/driver/provider_table.py) becomes a provider process command.

`external-docker` runs devsy-provider-docker and `external-microsandbox` devsy-provider-microsandbox (the built-in
drivers behind the protocol; same options); `external:EXECUTABLE` runs any provider executable, passing options
through unvalidated. Options travel as environment variables of the provider (KEY=VALUE), through the supervisor's
config pipe.
"""

from __future__ import annotations

from collections.abc import Mapping

from devsy.driver.provider_table import ProviderRow, locate, provider_rows, row_for
from devsy.errors import UsageError
from devsy.runtime.host.launcher import ProviderCommand


def is_external(name: str) -> bool:
    """Whether `--provider name` runs a Runtime Protocol provider executable on this host."""
    return any(row.matches(name) and row.kind == "external" for row in provider_rows())


def command_of(row: ProviderRow, name: str, options: Mapping[str, str]) -> ProviderCommand:
    """The process `--provider name` launches, for options its row has already validated."""
    return ProviderCommand(binary=locate(row.executable_for(name)), env=dict(options))


def provider_command(name: str, options: Mapping[str, str]) -> ProviderCommand:
    """The command devsy launches for `--provider name`; the options are validated first (before any process)."""
    row = row_for(name)
    if row.kind != "external":
        raise UsageError(f"--provider {name} is not an external provider",
                         hint="name an external provider: " + ", ".join(
                             r.label for r in provider_rows() if r.kind == "external"))
    row.parse_options(options)
    return command_of(row, name, options)
