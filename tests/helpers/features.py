"""Dev Container Features for tests: a local Feature folder, and what a test looks at afterwards."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.cli import DevsyCli


def make_feature(project: Path, folder_name: str, install: str, **meta: object) -> str:
    """A local Feature `.devcontainer/<folder_name>` whose install.sh runs `install` (sh, set -eu); its id."""
    folder = project / ".devcontainer" / folder_name
    folder.mkdir(parents=True)
    (folder / "devcontainer-feature.json").write_text(
        json.dumps({"id": Path(folder_name).name, "version": "1.0.0", **meta}))
    (folder / "install.sh").write_text("#!/bin/sh\nset -eu\n" + install)
    return f"./{folder_name}"


def guest_output(devsy: DevsyCli, ws_id: str, script: str) -> str:
    """What `script` prints in the workspace (devsy exec; it must succeed)."""
    result = devsy.run("exec", ws_id, "--", "sh", "-c", script)
    assert result.returncode == 0, result.text
    return result.stdout.decode()


def labelled_images(docker_client, ws_id: str) -> set[str]:
    """The ids of every image (untagged layers too) carrying the workspace's label."""
    return {image.id for image in docker_client.images.list(all=True,
                                                            filters={"label": f"dev.devsy.workspace={ws_id}"})}
