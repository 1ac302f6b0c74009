"""Issue 16 item 8: no value devsy passes as environment appears in anything devsy prints or stores.

One workspace's whole life through the real CLI on the real engine, with a distinct secret in each of containerEnv,
remoteEnv, a build arg, runArgs `-e` and `exec --env`: hooks and a build step print every one of them (stdout and
stderr), the first `up` fails in postCreateCommand, the second resumes and succeeds. After every command, devsy's
stdout and stderr (where they are devsy's own, not the guest's bytes `exec` relays), its `--json` outcomes, every
file under DEVSY_HOME and the ssh config file are searched for each secret, raw, base64 and URL-encoded. The guest
still gets the values.
"""

from __future__ import annotations

import base64
import secrets
import urllib.parse
from pathlib import Path

import pytest

from helpers.cli import HOST_NET, DevsyCli
from helpers.projects import make_project

pytestmark = pytest.mark.docker

NAMES = ("CE_TOKEN", "RE_TOKEN", "BA_TOKEN", "RA_TOKEN")
PRINT_ALL = " ".join(f'"${name}"' for name in NAMES)


def _secret() -> str:
    # '+', '@' and '/' make the URL-encoded and base64 forms differ from the raw one.
    return f"s3cr+t@{secrets.token_hex(12)}/x"


def _forms(value: str) -> list[bytes]:
    raw = value.encode()
    return [raw, base64.b64encode(raw), urllib.parse.quote(value, safe="").encode(),
            urllib.parse.quote_plus(value).encode()]


class Sweep:
    def __init__(self, devsy: DevsyCli, values: dict[str, str]) -> None:
        self.devsy = devsy
        self.forms = {name: _forms(value) for name, value in values.items()}

    def check(self, what: str, *outputs: bytes) -> None:
        places = {f"{what}: output {i}": data for i, data in enumerate(outputs)}
        for path in [*self.devsy.home.rglob("*"), self.devsy.ssh_config]:
            if path.is_file() and not path.is_symlink() and not path.is_socket():
                places[f"{what}: {path.relative_to(self.devsy.home.parent)}"] = path.read_bytes()
        leaks = [f"{name} in {place}" for place, data in places.items()
                 for name, forms in self.forms.items() if any(form in data for form in forms)]
        assert leaks == [], leaks


def test_no_value_devsy_passes_appears_in_its_output_or_state(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                              tmp_path: Path) -> None:
    values = {name: _secret() for name in (*NAMES, "EX_TOKEN")}
    project = make_project(tmp_path / "p", {
        "build": {"dockerfile": "Dockerfile", "args": {"BA_TOKEN": values["BA_TOKEN"]}},
        "containerEnv": {"CE_TOKEN": values["CE_TOKEN"]},
        "remoteEnv": {"RE_TOKEN": values["RE_TOKEN"]},
        "runArgs": ["-e", f"RA_TOKEN={values['RA_TOKEN']}"],
        "onCreateCommand": f"echo {PRINT_ALL}; echo {PRINT_ALL} >&2",
        # Fails until the test creates `ok` in the workspace, printing every value first (its tail is quoted).
        "postCreateCommand": f"echo {PRINT_ALL}; echo {PRINT_ALL} >&2; test -f ok",
    })
    (project / ".devcontainer" / "Dockerfile").write_text(
        f"FROM {guest_image}\nARG BA_TOKEN\nRUN echo \"build arg $BA_TOKEN\" && echo \"$BA_TOKEN\" >&2\n"
        "ENV BA_TOKEN=$BA_TOKEN\n")
    sweep = Sweep(devsy, values)

    failed = devsy.up(project, "--id", ws_id, "--wait-all-hooks", *HOST_NET, ok=False)  # postCreate's failure fails it
    assert failed.returncode != 0 and failed.json["error"], failed.text
    assert "postCreateCommand" in failed.text
    sweep.check("failed up", failed.stdout, failed.stderr)

    (project / "ok").write_text("")
    up = devsy.up(project, "--id", ws_id, *HOST_NET)
    sweep.check("second up", up.stdout, up.stderr)
    # postCreateCommand went on in the background this time: its log printed every value, masked.
    background = devsy.wait_hooks(ws_id)
    assert b"***" in background.stdout, background.text
    assert (devsy.home / "workspaces" / ws_id / "hooks.log").is_file()
    sweep.check("background hooks", background.stdout, background.stderr)

    status = devsy.run("status", ws_id, "--json")
    assert status.returncode == 0, status.text
    sweep.check("status", status.stdout, status.stderr)

    # The guest has every value: its own output is its own (devsy relays it unaltered and masks nothing there).
    shown = devsy.run("exec", "--env", f"EX_TOKEN={values['EX_TOKEN']}", ws_id, "--", "sh", "-c",
                      f"printf '%s\\n' {PRINT_ALL} \"$EX_TOKEN\"")
    assert shown.returncode == 0, shown.text
    assert shown.stdout.decode().split("\n")[:5] == [values[name] for name in (*NAMES, "EX_TOKEN")]
    sweep.check("exec (devsy's state only)")
    failing = devsy.run("exec", "--env", f"EX_TOKEN={values['EX_TOKEN']}", ws_id, "--", "sh", "-c", "exit 4")
    assert failing.returncode == 4
    sweep.check("failing exec", failing.stdout, failing.stderr)

    for command in ("stop", "start"):
        done = devsy.run(command, ws_id, "--json")
        assert done.returncode == 0, done.text
        sweep.check(command, done.stdout, done.stderr)
    reused = devsy.up(project, "--id", ws_id, *HOST_NET)
    sweep.check("reused up", reused.stdout, reused.stderr)
    deleted = devsy.run("delete", ws_id, "--json")
    assert deleted.returncode == 0, deleted.text
    sweep.check("delete", deleted.stdout, deleted.stderr)


@pytest.mark.parametrize("case", ["run-args", "build"])
def test_error_paths_do_not_quote_the_values(devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path,
                                             case: str) -> None:
    value = _secret()
    config: dict = {"image": guest_image}
    if case == "run-args":
        # An unsupported option next to an -e value: the refusal names the option, not the value.
        config["runArgs"] = ["-e", f"RA_TOKEN={value}", "--memory-swappiness", value]
    else:
        config = {"build": {"dockerfile": "Dockerfile", "args": {"BA_TOKEN": value}}}
    project = make_project(tmp_path / "p", config)
    (project / ".devcontainer" / "Dockerfile").write_text(
        f"FROM {guest_image}\nARG BA_TOKEN\nRUN echo \"$BA_TOKEN\"; echo \"$BA_TOKEN\" >&2; exit 7\n")
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0, result.text
    Sweep(devsy, {"TOKEN": value}).check(case, result.stdout, result.stderr)
