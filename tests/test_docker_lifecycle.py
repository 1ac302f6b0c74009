"""End to end on the real Docker engine: up, reuse, stop/start, recreate, delete, through the real CLI."""

from __future__ import annotations

import threading

from helpers.cli import HOST_NET
from helpers.engine import containers_of, volumes_of
from helpers.projects import make_project


def _created(result) -> str:
    return result.json["workspace"]["instance"]["created_at"]


def test_fresh_up_writes_record_and_ssh_entry_and_runs(devsy, ws_id, guest_image, tmp_path):
    project = make_project(tmp_path / "p", {"image": guest_image})
    out = devsy.up(project, "--id", ws_id, *HOST_NET).json
    assert out["outcome"] == "success" and out["workspace"]["status"] == "running"
    assert out["workspace"]["reused"] is False
    assert (devsy.home / "workspaces" / ws_id / "workspace.json").is_file()
    assert f"Host {ws_id}.devsy" in devsy.ssh_config.read_text()
    result = devsy.run("exec", ws_id, "--", "python3", "-c", "print(6*7)")
    assert (result.returncode, result.stdout) == (0, b"42\n")


def test_reuse_keeps_instance_and_stop_start_keeps_data(devsy, ws_id, guest_image, tmp_path, docker_client):
    project = make_project(tmp_path / "p", {"image": guest_image})
    first = devsy.up(project, "--id", ws_id, *HOST_NET).json["workspace"]
    again = devsy.up(project, "--id", ws_id).json["workspace"]
    assert again["reused"] is True
    assert again["instance"]["id"] == first["instance"]["id"]
    assert again["instance"]["created_at"] == first["instance"]["created_at"]

    assert devsy.run("exec", ws_id, "--", "sh", "-c", "echo kept > /var/tmp/marker").returncode == 0
    stopped = devsy.run("stop", ws_id, "--json").json["workspace"]
    assert stopped["status"] == "stopped"
    assert devsy.run("status", ws_id, "--json").json["workspace"]["status"] == "stopped"
    restarted = devsy.up(project, "--id", ws_id).json["workspace"]
    assert restarted["status"] == "running"
    assert restarted["instance"]["created_at"] == first["instance"]["created_at"]
    assert devsy.run("exec", ws_id, "--", "cat", "/var/tmp/marker").stdout == b"kept\n"
    assert len(containers_of(docker_client, ws_id)) == 1


def test_recreate_replaces_instance_keeps_content(devsy, ws_id, guest_image, tmp_path):
    project = make_project(tmp_path / "p", {"image": guest_image})
    first = devsy.up(project, "--id", ws_id, *HOST_NET).json["workspace"]
    folder = first["workspace_folder"]
    assert devsy.run("exec", ws_id, "--", "sh", "-c",
                     f"echo local > /var/tmp/marker && echo content > {folder}/kept.txt").returncode == 0
    second = devsy.up(project, "--id", ws_id, "--recreate").json["workspace"]
    assert second["instance"]["id"] != first["instance"]["id"]
    assert second["instance"]["created_at"] != first["instance"]["created_at"]
    assert devsy.run("exec", ws_id, "--", "test", "-e", "/var/tmp/marker").returncode == 1
    assert devsy.run("exec", ws_id, "--", "cat", f"{folder}/kept.txt").stdout == b"content\n"
    assert (project / "kept.txt").read_text() == "content\n"


def test_delete_leaves_nothing_and_keeps_local_folder(devsy, ws_id, guest_image, tmp_path, docker_client):
    project = make_project(tmp_path / "p", {"image": guest_image, "mounts": [
        f"type=volume,source={ws_id}-data,target=/data"]})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    assert len(volumes_of(docker_client, ws_id)) == 1
    out = devsy.run("delete", ws_id, "--json")
    assert out.returncode == 0, out.text
    assert containers_of(docker_client, ws_id) == []
    assert volumes_of(docker_client, ws_id) == []
    assert not (devsy.home / "workspaces" / ws_id).exists()
    assert ws_id not in devsy.ssh_config.read_text()
    assert (project / ".devcontainer" / "devcontainer.json").is_file()
    missing = devsy.run("status", ws_id, "--json")
    assert missing.returncode != 0 and missing.json["error"]["type"] == "workspace-not-found"


def test_image_source_gets_managed_content_removed_on_delete(devsy, ws_id, guest_image):
    out = devsy.up(guest_image, "--id", ws_id, *HOST_NET).json["workspace"]
    content = devsy.home / "workspaces" / ws_id / "content"
    assert out["content_dir"] == str(content) and content.is_dir()
    assert devsy.run("delete", ws_id).returncode == 0
    assert not content.exists()


def test_git_source_is_cloned_into_managed_content(devsy, ws_id, guest_image, tmp_path):
    import subprocess

    repo = tmp_path / "repo"
    make_project(repo, {"image": guest_image})
    (repo / "hello.txt").write_text("from git\n")
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    out = devsy.up(f"git:file://{repo}", "--id", ws_id, *HOST_NET).json["workspace"]
    result = devsy.run("exec", ws_id, "--", "cat", f"{out['workspace_folder']}/hello.txt")
    assert result.stdout == b"from git\n"


def test_lifecycle_commands_run_once_and_on_each_start(devsy, ws_id, guest_image, tmp_path):
    project = make_project(tmp_path / "p", {
        "image": guest_image,
        "onCreateCommand": "echo create >> /var/tmp/hooks",
        "postCreateCommand": ["sh", "-c", "echo postcreate >> /var/tmp/hooks"],
        "postStartCommand": {"a": "echo start >> /var/tmp/hooks"},
    })
    devsy.up(project, "--id", ws_id, *HOST_NET)
    devsy.wait_hooks(ws_id)  # postCreate and postStart come after waitFor
    devsy.up(project, "--id", ws_id)  # reuse of a running instance: no hook
    devsy.wait_hooks(ws_id)
    assert devsy.run("stop", ws_id).returncode == 0
    assert devsy.run("start", ws_id).returncode == 0
    hooks = devsy.run("exec", ws_id, "--", "cat", "/var/tmp/hooks").stdout.decode().split()
    assert hooks == ["create", "postcreate", "start", "start"]


def test_failing_lifecycle_command_reports_output_tail_and_leaves_nothing(devsy, ws_id, guest_image, tmp_path,
                                                                          docker_client):
    project = make_project(tmp_path / "p", {"image": guest_image,
                                            "onCreateCommand": "echo setup-went-wrong >&2; exit 3"})
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0
    error = result.json["error"]
    assert error["type"] == "lifecycle-command" and "setup-went-wrong" in error["message"]
    assert containers_of(docker_client, ws_id) == []
    assert not (devsy.home / "workspaces" / ws_id).exists()


def test_concurrent_up_makes_one_container_and_second_waits(devsy, ws_id, guest_image, tmp_path, docker_client):
    project = make_project(tmp_path / "p", {"image": guest_image})
    results = {}

    def run(name: str) -> None:
        results[name] = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.returncode == 0 for r in results.values()), [r.text for r in results.values()]
    reused = sorted(r.json["workspace"]["reused"] for r in results.values())
    assert reused == [False, True]  # the second waited for the lock, then reused what the first created
    assert len({r.json["workspace"]["instance"]["id"] for r in results.values()}) == 1
    assert len(containers_of(docker_client, ws_id)) == 1
