"""The updateRemoteUserUID layer's script (update_uid.py) run in a real container on edge cases of /etc/passwd."""

from __future__ import annotations

import subprocess

from devsy.devcontainer.update_uid import _UPDATE_SCRIPT

IMAGE = "devsy-guest:bookworm"


def _run(setup: str, user: str) -> str:
    script = f"{setup}\nREMOTE_USER='{user}' NEW_UID=42421 NEW_GID=42421 sh -c \"$UPDATE\"\ncat /etc/passwd"
    done = subprocess.run(["docker", "run", "--rm", "--network", "host", "-u", "root", "-e", f"UPDATE={_UPDATE_SCRIPT}",
                           IMAGE, "sh", "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_dot_in_the_name_does_not_match_another_user() -> None:
    # axb comes first in /etc/passwd: a pattern "^a.b:" matched it, and both users were given the new uid.
    passwd = _run("useradd -m axb && useradd -m a.b", "a.b")
    lines = {line.split(":")[0]: line.split(":") for line in passwd.splitlines() if ":" in line}
    assert lines["a.b"][2:4] == ["42421", "42421"], passwd
    assert lines["axb"][2] != "42421", passwd
