"""Providers are rows of one table (devsy/driver/provider_table.py): a row added at runtime reaches the CLI, the
harness's columns and the docs check with no other module edited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devsy.driver.external.providers import is_external, provider_command
from devsy.driver.provider_table import labels, provider_rows, register, row_for, unregister
from devsy.driver.registry import network_mode_of, validate_provider
from devsy.errors import UsageError
from harness.providers import devsy_columns
from helpers.projects import make_project

REPO = Path(__file__).resolve().parents[1]

# The protocol's fixture provider as one more row; the launcher registers it, then runs `devsy` or the harness.
FAKE_ROW = """\
from devsy.driver.provider_table import ProviderRow, external_driver, option_network, passthrough_options, register
register(ProviderRow("external-fake", "external", "fake", "the protocol's fixture provider (devsy-fake-runtime)",
                     passthrough_options, external_driver, option_network, executable="devsy-fake-runtime"))
"""
LAUNCH = {
    "devsy": "import sys\nfrom devsy.cli.main import main\nsys.exit(main(sys.argv[1:]))\n",
    "pytest": "import sys\nimport pytest\nsys.exit(pytest.main(sys.argv[1:]))\n",
}


def with_fake_row(tool: str, *args: str, tmp_path: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run `tool` (devsy or pytest) in a fresh process whose provider table has the external-fake row."""
    script = tmp_path / f"with_fake_{tool}.py"
    script.write_text(FAKE_ROW + LAUNCH[tool])
    env = {"DEVSY_HOME": str(tmp_path / "home"), "DEVSY_SSH_CONFIG": str(tmp_path / "ssh" / "config")}
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **env}, timeout=timeout)


@pytest.fixture
def fake_row() -> Iterator[str]:
    exec(compile(FAKE_ROW, "FAKE_ROW", "exec"), {})  # the same row, in this process
    yield "external-fake"
    unregister("external-fake")


def test_the_cli_lists_and_launches_a_provider_added_as_a_row(tmp_path: Path, guest_image: str) -> None:
    helped = with_fake_row("devsy", "up", "--help", tmp_path=tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert "external-fake = the protocol's fixture provider" in " ".join(helped.stdout.split())

    state = tmp_path / "fake-state"
    up = with_fake_row("devsy", "up", str(make_project(tmp_path / "p", {"image": guest_image})), "--id", "fake-row",
                       "--provider", "external-fake", "--provider-option", f"DEVSY_FAKE_STATE_DIR={state}", "--json",
                       tmp_path=tmp_path)
    outcome = json.loads(up.stdout)
    assert outcome["outcome"] == "success", up.stdout + up.stderr
    # The fake simulates exec by scenario name only, so `/bin/sh` exits 127 in it and devsy serves SSH from the host
    # (exec sessions): that, and the instance in the fake's own state, is the proof devsy-fake-runtime ran.
    assert outcome["workspace"]["ssh_path"] == "exec" and "has no usable /bin/sh (exit 127)" in up.stderr
    assert len(list(state.iterdir())) == 1, "the fake provider holds no instance for the workspace"

    deleted = with_fake_row("devsy", "delete", "fake-row", "--json", tmp_path=tmp_path)
    assert json.loads(deleted.stdout)["outcome"] == "success", deleted.stdout + deleted.stderr
    assert not list(state.iterdir()), "delete left the workspace's instance in the fake provider"


def test_an_unknown_provider_hint_lists_every_row_including_an_added_one(tmp_path: Path) -> None:
    up = with_fake_row("devsy", "up", str(tmp_path), "--provider", "external-nope", "--json", tmp_path=tmp_path)
    error = json.loads(up.stdout)["error"]
    assert up.returncode != 0 and error["type"] == "usage" and error["message"] == "unknown provider 'external-nope'"
    assert error["hint"] == ("use one of: docker, microsandbox, external-docker, external-microsandbox, remote, "
                             "external-fake, external:EXECUTABLE")


def test_the_harness_matrix_gains_a_column_for_an_added_row(tmp_path: Path) -> None:
    collected = with_fake_row("pytest", "scenarios", "--collect-only", "-q", "-p", "no:cacheprovider",
                              "--devsy-providers", "external-fake", "--devsy-report", str(tmp_path / "report"),
                              tmp_path=tmp_path)
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    # Cases that apply to no selected provider collect as `[NOTSET]` (remote-only cases here), as for any selection.
    items = [line for line in collected.stdout.splitlines() if "::" in line and not line.endswith("[NOTSET]")]
    assert items and all(line.endswith("[external-fake]") for line in items), collected.stdout[-2000:]
    # Without the row, the same selection is refused: the column came from the row alone.
    plain = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "--collect-only", "-q", "-p",
                            "no:cacheprovider", "--devsy-providers", "external-fake",
                            "--devsy-report", str(tmp_path / "plain")],
                           capture_output=True, text=True, cwd=REPO, timeout=240)
    assert plain.returncode != 0 and "unknown provider 'external-fake'" in plain.stdout + plain.stderr


def test_harness_columns_are_the_named_rows_with_this_hosts_options(fake_row: str) -> None:
    columns = {column.name: column.up_args() for column in devsy_columns()}
    assert columns == {
        "builtin-docker": ["--provider", "docker", "--provider-option", "NETWORK_MODE=host"],
        "builtin-microsandbox": ["--provider", "microsandbox"],
        "external-docker": ["--provider", "external-docker", "--provider-option", "NETWORK_MODE=host"],
        "external-microsandbox": ["--provider", "external-microsandbox"],
        "remote-docker": ["--provider", "remote", "--provider-option", "NETWORK_MODE=host"],
        "external-fake": ["--provider", "external-fake"],
    }


# -- the docs name every row --------------------------------------------------------------------------------------

def provider_bullet(readme: str) -> str:
    """The README's `- Providers ...` bullet (up to the next bullet)."""
    start = readme.index("\n- Providers")
    return readme[start:readme.index("\n- ", start + 1)]


def undocumented(text: str, names: list[str]) -> list[str]:
    return [name for name in names if f"`{name}`" not in text]


def test_the_docs_name_every_provider_row() -> None:
    assert undocumented(provider_bullet((REPO / "README.md").read_text()), labels()) == []
    assert undocumented((REPO / "harness" / "README.md").read_text(), [c.name for c in devsy_columns()]) == []


def test_the_docs_check_sees_an_added_row_missing_until_it_is_named(fake_row: str) -> None:
    bullet = provider_bullet((REPO / "README.md").read_text())
    assert undocumented(bullet, labels()) == [fake_row]
    assert undocumented(bullet + f" `{fake_row}` (the fixture provider)", labels()) == []
    harness_readme = (REPO / "harness" / "README.md").read_text()
    assert undocumented(harness_readme, [c.name for c in devsy_columns()]) == [fake_row]


# -- the table's API, as the runner uses it -----------------------------------------------------------------------

def test_a_provider_only_loads_its_own_modules() -> None:
    # Validating a docker provider (as `devsy delete` does for a salvaged record) enters no other provider's code.
    probe = ("import json, sys\nfrom devsy.driver.registry import validate_provider\n"
             "validate_provider('docker', {'NETWORK_MODE': 'host'})\n"
             "print(json.dumps(sorted(sys.modules)))\n")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    modules = json.loads(loaded.stdout)
    assert "devsy.driver.docker.options" in modules
    assert not [m for m in modules if m.startswith(("devsy.driver.microsandbox", "devsy.driver.external",
                                                     "devsy.driver.remote", "grpc", "devsy.runtime"))], modules


def test_rows_validate_options_and_name_the_host_build_network() -> None:
    assert network_mode_of("docker", {"NETWORK_MODE": "host"}) == "host"
    assert network_mode_of("external-docker", {"NETWORK_MODE": "none"}) == "none"
    assert network_mode_of("microsandbox", {}) == "default"
    assert network_mode_of("external:/opt/p", {"NETWORK_MODE": "host"}) == "host"
    with pytest.raises(UsageError, match="unknown docker provider option BOGUS"):
        validate_provider("external-docker", {"BOGUS": "1"})
    with pytest.raises(UsageError, match="needs an executable"):
        validate_provider("external:", {})
    assert [is_external(n) for n in ("docker", "remote", "external-microsandbox", "external:x")] == [
        False, False, True, True]
    assert provider_command("external-docker", {"NETWORK_MODE": "host"}).name == "devsy-provider-docker"
    assert row_for("external:/opt/provider").label == "external:EXECUTABLE"


def test_a_row_name_is_taken_once() -> None:
    with pytest.raises(ValueError, match="exists already"):
        register(provider_rows()[0])
