"""Bad input and failures: a clear error that says what to do, a non-zero exit, and nothing left behind."""

from __future__ import annotations

from helpers.cli import HOST_NET
from helpers.engine import containers_of, volumes_of
from helpers.projects import make_project

# Nothing listens on the discard port of loopback: a pull of this reference fails at once and stays on this machine.
MISSING_IMAGE = "127.0.0.1:9/devsy-tests/missing:none"


def _nothing_left(devsy, docker_client, workspace_id: str) -> None:
    assert containers_of(docker_client, workspace_id) == []
    assert volumes_of(docker_client, workspace_id) == []
    assert not (devsy.home / "workspaces" / workspace_id).exists()
    assert not devsy.ssh_config.exists() or workspace_id not in devsy.ssh_config.read_text()


def test_first_up_with_missing_image_leaves_nothing(devsy, ws_id, tmp_path, docker_client):
    project = make_project(tmp_path / "p", {"image": MISSING_IMAGE,
                                            "mounts": [f"type=volume,source={ws_id}-v,target=/v"]})
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode == 1
    error = result.json["error"]
    assert error["type"] == "image" and MISSING_IMAGE in error["message"] and error["hint"]
    _nothing_left(devsy, docker_client, ws_id)


def test_failing_reup_keeps_existing_record_content_and_ssh_entry(devsy, ws_id, guest_image, docker_client):
    first = devsy.up(guest_image, "--id", ws_id, *HOST_NET).json["workspace"]
    content = devsy.home / "workspaces" / ws_id / "content"
    (content / "work.txt").write_text("precious")
    record_before = (devsy.home / "workspaces" / ws_id / "workspace.json").read_bytes()
    ssh_before = devsy.ssh_config.read_text()
    # Replacing the instance with an image that cannot be had fails before the old instance is touched.
    result = devsy.up(guest_image, "--id", ws_id, "--recreate", "--provider-option", "NETWORK_MODE=bogus", ok=False)
    assert result.returncode != 0 and result.json["error"]["type"] == "usage"
    assert (devsy.home / "workspaces" / ws_id / "workspace.json").read_bytes() == record_before
    assert devsy.ssh_config.read_text() == ssh_before
    assert (content / "work.txt").read_text() == "precious"
    [container] = containers_of(docker_client, ws_id)
    assert container.id == first["instance"]["id"]


def test_failing_reup_of_folder_with_broken_config_keeps_everything(devsy, ws_id, guest_image, tmp_path,
                                                                    docker_client):
    project = make_project(tmp_path / "p", {"image": guest_image})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    record = devsy.home / "workspaces" / ws_id / "workspace.json"
    before = record.read_bytes()
    make_project(project, '{"image": "x",\n  "remoteUser": }')
    result = devsy.up(project, "--id", ws_id, ok=False)
    assert result.returncode != 0
    error = result.json["error"]
    assert error["type"] == "config" and "devcontainer.json" in error["message"] and "line 2" in error["message"]
    assert record.read_bytes() == before and f"Host {ws_id}.devsy" in devsy.ssh_config.read_text()
    assert len(containers_of(docker_client, ws_id)) == 1


def test_malformed_config_on_first_up_leaves_nothing(devsy, ws_id, tmp_path, docker_client):
    project = make_project(tmp_path / "p", '{"image": "x" "oops": 1}')
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0 and result.json["error"]["type"] == "config"
    assert "column" in result.json["error"]["message"]
    _nothing_left(devsy, docker_client, ws_id)


def test_unknown_and_invalid_provider_options_are_refused(devsy, ws_id, guest_image, docker_client):
    unknown = devsy.up(guest_image, "--id", ws_id, "--provider-option", "NETWORK=host", ok=False)
    assert unknown.json["error"]["type"] == "usage" and "NETWORK" in unknown.json["error"]["message"]
    assert "NETWORK_MODE" in unknown.json["error"]["hint"]
    invalid = devsy.up(guest_image, "--id", ws_id, "--provider-option", "STOP_TIMEOUT=-1", ok=False)
    assert invalid.json["error"]["type"] == "usage" and "STOP_TIMEOUT" in invalid.json["error"]["message"]
    mode = devsy.up(guest_image, "--id", ws_id, "--provider-option", "NETWORK_MODE=Value-S3cret", ok=False)
    assert mode.json["error"]["type"] == "usage" and "NETWORK_MODE" in mode.json["error"]["message"]
    assert "Value-S3cret" not in mode.text  # an option error names the option, never its value
    provider = devsy.up(guest_image, "--id", ws_id, "--provider", "nope", ok=False)
    assert provider.json["error"]["type"] == "usage"
    _nothing_left(devsy, docker_client, ws_id)


def test_workspace_ids_with_path_tricks_are_refused(devsy, guest_image):
    for bad in ("../escape", "a/b", "..", "Upper"):
        result = devsy.up(guest_image, "--id", bad, ok=False)
        assert result.returncode == 2 and result.json["error"]["type"] == "usage", bad
        assert "--id" in result.json["error"]["hint"]
    assert not (devsy.home / "workspaces").exists() or not any((devsy.home / "workspaces").iterdir())


def test_no_docker_daemon_is_a_clear_error(devsy, ws_id, guest_image, tmp_path):
    result = devsy.up(guest_image, "--id", ws_id, ok=False,
                      extra_env={"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"})
    assert result.returncode == 1
    error = result.json["error"]
    assert error["type"] == "backend-unavailable" and "Docker" in error["message"] and "dockerd" in error["hint"]
    assert not (devsy.home / "workspaces" / ws_id).exists()


def test_changed_remote_user_is_refused_without_recreate(devsy, ws_id, guest_image, tmp_path, docker_client):
    project = make_project(tmp_path / "p", {"image": guest_image, "remoteUser": "dev"})
    first = devsy.up(project, "--id", ws_id, *HOST_NET).json["workspace"]
    make_project(project, {"image": guest_image, "remoteUser": "alt"})
    refused = devsy.up(project, "--id", ws_id, ok=False)
    assert refused.returncode != 0 and refused.json["error"]["type"] == "recreate-required"
    assert "--recreate" in refused.json["error"]["hint"]
    [container] = containers_of(docker_client, ws_id)
    assert container.id == first["instance"]["id"]
    again = devsy.up(project, "--id", ws_id, "--recreate").json["workspace"]
    assert again["remote_user"] == "alt"
    assert devsy.run("exec", ws_id, "--", "id", "-un").stdout == b"alt\n"
