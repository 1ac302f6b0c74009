"""setuptools hook: installing devsy also fetches the agent's pinned wheels into its package data.

All metadata lives in pyproject.toml; this file only adds the `build_agent_wheels` build sub-command, which puts
the wheel set of devsy/agent/lock.py (the single source of the pins) for every supported architecture in
`devsy/agent/_wheels/<lock key>/<arch>/` (devsy/agent/wheels.py reads it), so no `devsy up` needs a package index.
`pip install .` and `pip wheel .` write it into the build directory (hence the wheel); an editable install
(`pip install -e .`) writes it into the source tree, where the editable finder maps `devsy` (gitignored).
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import Command, setup
from setuptools.errors import ExecError
from setuptools.command.build import build

ROOT = Path(__file__).resolve().parent
# A PEP 517 backend runs this file without the project on sys.path; the pins and the downloader are devsy's own.
sys.path.insert(0, str(ROOT))
_IN_TREE = ROOT / "devsy" / "agent" / "_wheels"
_RELATIVE = Path("devsy") / "agent" / "_wheels"


class BuildAgentWheels(Command):
    """Fetch the agent's wheel set (devsy/agent/lock.py) for x86_64 and aarch64 into the package data."""

    description = "fetch the agent's pinned wheels into devsy/agent/_wheels"
    user_options: list[tuple[str, str | None, str]] = []

    def initialize_options(self) -> None:
        self.build_lib: str | None = None
        self.editable_mode = False  # set by setuptools for PEP 660 editable installs (the SubCommand protocol)

    def finalize_options(self) -> None:
        self.set_undefined_options("build_py", ("build_lib", "build_lib"))

    def _dest(self) -> Path:
        return _IN_TREE if self.editable_mode else Path(self.build_lib or "build/lib") / _RELATIVE

    def run(self) -> None:
        from devsy.agent.errors import AgentBuildError  # the devsy source being installed, not an installed one
        from devsy.agent.wheels import fill_package_data

        try:
            fill_package_data(self._dest(), reuse=_IN_TREE, log=lambda text: self.announce(text, level=2))
        except AgentBuildError as exc:
            raise ExecError(f"installing devsy fetches the agent's pinned wheels (devsy/agent/lock.py) with "
                                 f"pip, and that failed: {exc.message}\n  hint: check the network and pip's index "
                                 f"settings; every other build step needs the same index") from exc

    def get_outputs(self) -> list[str]:
        dest = self._dest()
        return sorted(str(p) for p in dest.rglob("*") if p.is_file()) if dest.is_dir() else []

    def get_output_mapping(self) -> dict[str, str]:
        return {}  # generated, not copied from a source file

    def get_source_files(self) -> list[str]:
        return []


class Build(build):
    sub_commands = [*build.sub_commands, ("build_agent_wheels", None)]


setup(cmdclass={"build": Build, "build_agent_wheels": BuildAgentWheels})
