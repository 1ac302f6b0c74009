"""How an external row of the provider table (devsy/driver/provider_table.py) becomes a provider process command.

`external-docker` runs `devsy-provider-docker serve` and `external-microsandbox` `devsy-provider-microsandbox serve`
(the built-in drivers behind the protocol; same options; `serve` is what their rows declare); `external:EXECUTABLE`
runs any provider executable with exactly the arguments its ARGS option declares (shell-style quoting, none by
default: what a go-plugin provider expects), passing the other options through unvalidated. Options travel as
environment variables of the provider (KEY=VALUE), arguments as its argv, both through the supervisor's config pipe
(never a command line another user can read) and redacted from devsy's messages.
"""

from __future__ import annotations

from collections.abc import Mapping

from devsy.driver.external.args import declared_args
from devsy.driver.provider_table import ARGS_OPTION, ProviderRow, locate, provider_rows, row_for
from devsy.errors import UsageError
from devsy.runtime.host.launcher import ProviderCommand


def is_external(name: str) -> bool:
    """Whether `--provider name` runs a Runtime Protocol provider executable on this host."""
    return any(row.matches(name) and row.kind == "external" for row in provider_rows())


def command_of(row: ProviderRow, name: str, options: Mapping[str, str]) -> ProviderCommand:
    """The process `--provider name` launches, for options its row has already validated."""
    env = dict(options)
    args = list(row.args)
    if ARGS_OPTION in env:  # accepted only by rows that declare no arguments (external:EXECUTABLE)
        args = declared_args(env.pop(ARGS_OPTION))
    return ProviderCommand(binary=locate(row.executable_for(name)), args=args, env=env)

def provider_command(name: str, options: Mapping[str, str]) -> ProviderCommand:
    """The command devsy launches for `--provider name`; the options are validated first (before any process)."""
    row = row_for(name)
    if row.kind != "external":
        raise UsageError(f"--provider {name} is not an external provider",
                         hint="name an external provider: " + ", ".join(
                             r.label for r in provider_rows() if r.kind == "external"))
    row.parse_options(options)
    return command_of(row, name, options)
