"""Where devsy finds `msb`: MSB_PATH, the wheel's bundled binary, PATH, then msb's own installer's places."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devsy.driver.microsandbox import locate
from devsy.errors import BackendUnavailable
from helpers.msb import REAL_MSB


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No MSB_PATH, no bundled msb, an empty PATH and a fresh home: every place is empty until a test fills it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.delenv(locate.MSB_PATH_ENV, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.setattr(locate, "bundled_msb", lambda: None)
    return home


def _install(place: Path) -> Path:
    place.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REAL_MSB, place)
    return place


@pytest.mark.parametrize("place", [".microsandbox/bin/msb", ".local/bin/msb"])
def test_msb_is_found_where_its_installer_puts_it(bare: Path, place: str) -> None:
    installed = _install(bare / place)
    assert locate.find_msb() == str(installed)
    assert locate.locate_msb().version >= locate.MIN_MSB_VERSION  # the real binary answers from there


def test_the_installer_places_come_after_path_and_in_msbs_own_order(bare: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    local = _install(bare / ".local/bin/msb")
    primary = _install(bare / ".microsandbox/bin/msb")
    assert locate.find_msb() == str(primary)
    primary.unlink()
    assert locate.find_msb() == str(local)
    on_path = _install(tmp_path / "empty-path" / "msb")
    assert locate.find_msb() == str(on_path)


def test_a_file_that_is_not_executable_is_passed_over(bare: Path) -> None:
    place = bare / ".microsandbox/bin/msb"
    place.parent.mkdir(parents=True)
    place.write_text("not a program")
    with pytest.raises(BackendUnavailable):
        locate.find_msb()


def test_the_error_lists_every_place_and_how_to_install(bare: Path) -> None:
    with pytest.raises(BackendUnavailable) as excinfo:
        locate.find_msb()
    error = excinfo.value
    for place in ("MSB_PATH", "bundled", "PATH", str(bare / ".microsandbox/bin/msb"), str(bare / ".local/bin/msb")):
        assert place in error.message, error.message
    assert "pip install microsandbox" in error.hint and "install.microsandbox.dev" in error.hint


def test_the_bundled_binary_still_wins_over_path_and_installer_places(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    monkeypatch.delenv(locate.MSB_PATH_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    _install(tmp_path / ".microsandbox/bin/msb")
    assert locate.find_msb() == str(locate.bundled_msb()) == REAL_MSB


def test_the_cli_reports_a_missing_msb_with_every_place(tmp_path: Path) -> None:
    """Through the real CLI, in an interpreter whose bundled msb is hidden (-I -S: no site-packages)."""
    home = tmp_path / "home"
    home.mkdir()
    site = [p for p in sys.path if p.endswith("site-packages")]
    # The real CLI, with the microsandbox package removed from its import path.
    code = ("import sys, importlib.util as u; real = u.find_spec; "
            "u.find_spec = lambda n, *a: None if n == 'microsandbox' else real(n, *a); "
            "from devsy.cli.main import main; sys.exit(main(sys.argv[1:]))")
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "DEVSY_HOME": str(tmp_path / "devsy"),
           "PYTHONPATH": os.pathsep.join([str(Path(locate.__file__).parents[3]), *site])}
    project = tmp_path / "p" / ".devcontainer"
    project.mkdir(parents=True)
    (project / "devcontainer.json").write_text('{"image": "x"}')
    proc = subprocess.run([sys.executable, "-c", code, "up", str(project.parent), "--provider", "microsandbox",
                           "--json"], env=env, capture_output=True, timeout=120)
    assert proc.returncode != 0
    message = proc.stdout.decode()
    assert str(home / ".microsandbox/bin/msb") in message and str(home / ".local/bin/msb") in message, message
    assert "Traceback" not in proc.stderr.decode()
