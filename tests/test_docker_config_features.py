"""devcontainer.json features end to end on the real engine: build, env, mounts, host requirements, variables."""

from __future__ import annotations

from helpers.cli import HOST_NET
from helpers.engine import containers_of
from helpers.projects import make_project


def test_dockerfile_build_is_used_and_removed_on_delete(devsy, ws_id, guest_image, tmp_path, docker_client):
    project = make_project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile", "args": {"GREETING": "hi"}}})
    (project / ".devcontainer" / "Dockerfile").write_text(
        f"FROM {guest_image}\nARG GREETING\nRUN echo \"$GREETING from build\" > /built.txt\n")
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert devsy.run("exec", ws_id, "--", "cat", "/built.txt").stdout == b"hi from build\n"
    built = {"label": [f"dev.devsy.workspace={ws_id}"]}
    assert len(docker_client.images.list(filters=built)) == 1
    assert devsy.run("delete", ws_id).returncode == 0
    assert docker_client.images.list(filters=built) == []


def test_broken_dockerfile_reports_build_output(devsy, ws_id, guest_image, tmp_path, docker_client):
    project = make_project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile"}})
    (project / ".devcontainer" / "Dockerfile").write_text(f"FROM {guest_image}\nRUN echo {ws_id} && exit 7\n")
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode == 1 and result.json["error"]["type"] == "image"
    assert containers_of(docker_client, ws_id) == []
    # The failed build step's intermediate container (its command names this workspace) is removed too.
    leftovers = [c for c in docker_client.containers.list(all=True) if ws_id in " ".join(c.attrs["Config"]["Cmd"] or [])]
    assert leftovers == []
    assert not (devsy.home / "workspaces" / ws_id).exists()


def test_env_user_and_workspace_folder(devsy, ws_id, guest_image, tmp_path):
    project = make_project(tmp_path / "p", {
        "image": guest_image,
        "remoteUser": "dev",
        "containerEnv": {"FROM_CONTAINER": "c-${localWorkspaceFolderBasename}"},
        "remoteEnv": {"FROM_REMOTE": "r"},
        "workspaceFolder": "/work/${localWorkspaceFolderBasename}",
        "workspaceMount": "type=bind,source=${localWorkspaceFolder},target=/work/${localWorkspaceFolderBasename}",
        "postCreateCommand": "echo \"$FROM_REMOTE $(id -un) $(pwd)\" > /tmp/hook.txt",
    })
    out = devsy.up(project, "--id", ws_id, *HOST_NET).json["workspace"]
    assert out["remote_user"] == "dev" and out["workspace_folder"] == "/work/p"
    devsy.wait_hooks(ws_id)  # postCreateCommand comes after waitFor
    result = devsy.run("exec", ws_id, "--", "sh", "-c", "echo $FROM_CONTAINER $(id -un) $(pwd)")
    assert result.stdout == b"c-p dev /work/p\n"
    assert devsy.run("exec", ws_id, "--", "cat", "/tmp/hook.txt").stdout == b"r dev /work/p\n"


def test_bind_read_only_volume_and_tmpfs_mounts(devsy, ws_id, guest_image, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "in.txt").write_text("host")
    project = make_project(tmp_path / "p", {"image": guest_image, "mounts": [
        f"type=bind,source={shared},target=/ro,readonly",
        {"type": "volume", "source": f"{ws_id}-vol", "target": "/vol"},
        {"type": "tmpfs", "target": "/scratch"},
    ]})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert devsy.run("exec", ws_id, "--", "cat", "/ro/in.txt").stdout == b"host"
    write = devsy.run("exec", ws_id, "--", "sh", "-c", "echo x > /ro/new.txt")
    assert write.returncode != 0 and b"Read-only" in write.stderr
    assert devsy.run("exec", ws_id, "--", "sh", "-c", "echo v > /vol/f && echo t > /scratch/f").returncode == 0
    devsy.run("stop", ws_id)
    devsy.run("start", ws_id)
    assert devsy.run("exec", ws_id, "--", "cat", "/vol/f").stdout == b"v\n"
    assert devsy.run("exec", ws_id, "--", "test", "-e", "/scratch/f").returncode == 1
    devsy.up(project, "--id", ws_id, "--recreate")
    assert devsy.run("exec", ws_id, "--", "cat", "/vol/f").stdout == b"v\n"


def test_met_host_requirements_do_not_limit_the_container(devsy, ws_id, guest_image, tmp_path, docker_client):
    # Minimums, not caps (tests/test_host_requirements_minimum.py has the unmet side).
    project = make_project(tmp_path / "p", {"image": guest_image,
                                            "hostRequirements": {"cpus": 1, "memory": "512mb"}})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    [container] = containers_of(docker_client, ws_id)
    host_config = container.attrs["HostConfig"]
    assert host_config["Memory"] == 0
    assert host_config["NanoCpus"] == 0
