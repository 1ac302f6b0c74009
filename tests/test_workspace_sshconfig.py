from __future__ import annotations

import os
from pathlib import Path

import pytest

from devsy.errors import UsageError, WorkspaceError
from devsy.workspace.sshconfig import list_blocks, read_block, remove_block, render_block, write_block

OPTIONS = {"User": "vscode", "ProxyCommand": "devsy ssh proj --stdio", "StrictHostKeyChecking": "no"}
GLOBAL = "# my settings\nServerAliveInterval 30\n\n"
HOSTS = "Host *\n  User me\n\nHost work\r\n  HostName w.example\t# tab kept\n\xff\n"


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def test_render_block_has_markers_host_and_options() -> None:
    assert render_block("proj", OPTIONS) == (
        "# >>> devsy workspace proj >>>\n"
        "Host proj.devsy\n"
        "  User vscode\n"
        "  ProxyCommand devsy ssh proj --stdio\n"
        "  StrictHostKeyChecking no\n"
        "# <<< devsy workspace proj <<<\n"
    )


@pytest.mark.parametrize("options", [{"User": "x\nHost *"}, {"Bad Key": "x"}, {"User": ""}])
def test_render_block_refuses_options_that_could_inject_lines(options: dict[str, str]) -> None:
    with pytest.raises(WorkspaceError):
        render_block("proj", options)


def test_render_block_validates_the_id() -> None:
    with pytest.raises(UsageError):
        render_block("../x", {})


def test_missing_file_and_parent_are_created_private(tmp_path: Path) -> None:
    config = tmp_path / "ssh" / "config"
    assert write_block(config, "proj", OPTIONS) is True
    assert config.read_text() == render_block("proj", OPTIONS)
    assert config.stat().st_mode & 0o777 == 0o600
    assert config.parent.stat().st_mode & 0o777 == 0o700
    assert list_blocks(config) == ["proj"]


def test_insert_goes_after_global_options_and_before_first_host_byte_exact(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_bytes(_bytes(GLOBAL + HOSTS))
    config.chmod(0o640)
    assert write_block(config, "proj", OPTIONS) is True
    assert config.read_bytes() == _bytes(GLOBAL + render_block("proj", OPTIONS) + HOSTS)
    assert config.stat().st_mode & 0o777 == 0o640


def test_replace_in_place_and_remove_restore_surroundings_byte_exact(tmp_path: Path) -> None:
    config = tmp_path / "config"
    original = GLOBAL + HOSTS
    config.write_bytes(_bytes(original))
    write_block(config, "proj", OPTIONS)
    write_block(config, "other", {"User": "root"})
    assert list_blocks(config) == ["proj", "other"]
    changed = {**OPTIONS, "User": "node"}
    assert write_block(config, "proj", changed) is True
    assert config.read_bytes() == _bytes(GLOBAL + render_block("proj", changed) + render_block("other", {"User": "root"}) + HOSTS)
    assert write_block(config, "proj", changed) is False
    assert read_block(config, "proj") == render_block("proj", changed)
    assert remove_block(config, "proj") is True
    assert remove_block(config, "proj") is False
    assert remove_block(config, "other") is True
    assert config.read_bytes() == _bytes(original)
    assert read_block(config, "proj") is None and list_blocks(config) == []


def test_append_to_file_without_sections_or_final_newline(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("Compression yes")
    write_block(config, "proj", {"User": "me"})
    assert config.read_text() == "Compression yes\n" + render_block("proj", {"User": "me"})


def test_remove_from_missing_file_is_false(tmp_path: Path) -> None:
    assert remove_block(tmp_path / "none", "proj") is False
    assert not (tmp_path / "none").exists()


def test_symlinked_config_is_edited_through_the_link(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "ssh_config"
    real.parent.mkdir()
    real.write_text(HOSTS)
    link = tmp_path / "config"
    link.symlink_to(real)
    write_block(link, "proj", OPTIONS)
    assert link.is_symlink()
    assert real.read_text().startswith(render_block("proj", OPTIONS))


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("Host a\n# >>> devsy workspace proj >>>\nHost proj.devsy\n  User x\n", 2),
        ("# >>> devsy workspace proj >>>\nHost proj.devsy\n# >>> devsy workspace b >>>\n# <<< devsy workspace b <<<\n", 1),
        ("\n\n# <<< devsy workspace proj <<<\n", 3),
    ],
)
def test_broken_markers_are_errors_naming_file_and_line(tmp_path: Path, content: str, line: int) -> None:
    config = tmp_path / "config"
    config.write_text(content)
    for action in (
        lambda: write_block(config, "proj", OPTIONS),
        lambda: remove_block(config, "proj"),
        lambda: list_blocks(config),
        lambda: read_block(config, "proj"),
    ):
        with pytest.raises(WorkspaceError) as info:
            action()
        assert f"{config} line {line}:" in info.value.message
    assert config.read_text() == content
    # Another workspace's block is still written (issue 11), and the broken lines are kept byte-exact after it.
    assert write_block(config, "other", OPTIONS)
    assert read_block(config, "other") == render_block("other", OPTIONS)
    text = config.read_text()
    assert text.replace(render_block("other", OPTIONS), "", 1) == content
    assert "devsy workspace" not in content[: text.index(render_block("other", OPTIONS))]  # never inside it
    assert remove_block(config, "other") and config.read_text() == content


def test_write_leaves_no_temp_files(tmp_path: Path) -> None:
    config = tmp_path / "config"
    write_block(config, "proj", OPTIONS)
    remove_block(config, "proj")
    assert sorted(os.listdir(tmp_path)) == ["config", "config.devsy.lock"]


def test_concurrent_writers_from_many_processes_lose_no_block(tmp_path: Path) -> None:
    import subprocess
    import sys

    config = tmp_path / "config"
    config.write_bytes(_bytes(HOSTS))
    script = (
        "import sys; from pathlib import Path; from devsy.workspace.sshconfig import write_block\n"
        "sys.stdin.readline()\n"  # start together, to collide
        "for n in range(15):\n"
        "    write_block(Path(sys.argv[1]), sys.argv[2], {'User': f'u{n}'})\n"
    )
    ids = [f"ws{n}" for n in range(6)]
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(config), i], stdin=subprocess.PIPE, text=True) for i in ids
    ]
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.close()
    assert [proc.wait(timeout=60) for proc in procs] == [0] * len(ids)
    assert sorted(list_blocks(config)) == ids
    assert all(read_block(config, i) == render_block(i, {"User": "u14"}) for i in ids)
    assert config.read_bytes().endswith(_bytes(HOSTS))
