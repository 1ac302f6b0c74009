"""Review of waitFor's background hooks (411a31e): cases the commit's own tests do not cover, through the real CLI on
the real engine."""

from __future__ import annotations

from helpers.cli import HOST_NET
from helpers.engine import containers_of
from helpers.projects import make_project
from fixtures.process_observer import ProcessObserver
from test_wait_for import _BLOCKS, _NONCE, _Fifo, _background, _log, _up_until_the_hook_started


def test_start_of_a_running_workspace_leaves_its_background_hooks_running(devsy, ws_id, guest_image, tmp_path,
                                                                          docker_client):
    """`devsy start` of a workspace that is already running starts nothing and runs no hook; it must not end the
    postCreateCommand the last up left to the background (nothing would run it, or the postAttach after it, until
    another `up`)."""
    project = make_project(tmp_path / "p", {"image": guest_image, "postCreateCommand": f"{_BLOCKS}; {_log('postCreate')}",
                                            "postAttachCommand": _log("postAttach")})
    fifo = _Fifo(project)
    try:
        devsy.up(project, "--id", ws_id, *HOST_NET)
        (container,) = containers_of(docker_client, ws_id)
        guest = ProcessObserver.via_docker(container.id).identify(fifo.read_pid(), _NONCE)
    finally:
        fifo.close()
    try:
        started = devsy.run("start", ws_id)
        assert started.returncode == 0, started.text
        after = _background(devsy, ws_id)
        assert after["state"] == "running", (after, started.text)
        (project / "release").touch()
        devsy.wait_hooks(ws_id)
        assert (project / "order.log").read_text().split() == ["postCreate", "postAttach"]
    finally:
        (project / "release").touch()
        del guest
        assert devsy.run("delete", ws_id).returncode == 0


def test_an_up_refused_before_it_changes_anything_leaves_the_background_hooks_running(devsy, ws_id, guest_image,
                                                                                      tmp_path):
    """An `up` of another folder under the same id is refused (the workspace belongs to another source): it changes
    nothing, so it must not end the postCreateCommand the workspace's own up left to the background."""
    project = make_project(tmp_path / "p", {"image": guest_image, "postCreateCommand": f"{_BLOCKS}; {_log('postCreate')}"})
    other = make_project(tmp_path / "other", {"image": guest_image})
    _up_until_the_hook_started(devsy, project, ws_id)
    try:
        refused = devsy.up(other, "--id", ws_id, ok=False)
        assert refused.returncode != 0 and "already exists for another source" in refused.text, refused.text
        after = _background(devsy, ws_id)
        assert after["state"] == "running", (after, refused.text)
    finally:
        (project / "release").touch()
        assert devsy.run("delete", ws_id).returncode == 0


def test_up_json_names_the_background_hook_it_left_running(devsy, ws_id, guest_image, tmp_path):
    """`up --json` says the background hooks are `running`; `running` then names the hook running (the first one,
    as `devsy status` says in words), not an empty string that reads as "none"."""
    project = make_project(tmp_path / "p", {"image": guest_image, "postCreateCommand": f"{_BLOCKS}; {_log('postCreate')}"})
    fifo = _Fifo(project)
    try:
        up = devsy.up(project, "--id", ws_id, *HOST_NET)
        fifo.read_pid()
    finally:
        fifo.close()
    try:
        hooks = up.json["workspace"]["background_hooks"]
        assert hooks["state"] == "running" and hooks["running"] == "postCreateCommand", hooks
    finally:
        (project / "release").touch()
        assert devsy.run("delete", ws_id).returncode == 0
