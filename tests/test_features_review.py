"""Cold review of Dev Container Features (issue 17): each test FAILS because of a bug found in the review.

Through the real CLI on the real Docker engine, as tests/test_features_local.py does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from helpers.features import make_feature as _feature
from helpers.cli import DEVSY, HOST_NET, DevsyCli, cli_env
from helpers.projects import make_project

pytestmark = pytest.mark.docker


def _labelled_images(docker_client, ws_id: str) -> list[str]:
    return [image.id for image in
            docker_client.images.list(all=True, filters={"label": f"dev.devsy.workspace={ws_id}"})]


def test_interrupted_feature_install_leaves_no_labelled_image(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                              tmp_path: Path, docker_client) -> None:
    """BUG: Ctrl-C during a Feature's install.sh on a first up says "anything it had created was removed", but the
    Feature build's labelled layers (LABEL/USER/COPY steps) stay, and with no record `devsy delete` cannot find them."""
    project = make_project(tmp_path / "p", {"image": guest_image, "features": {"./hang": {}}})
    _feature(project, "hang", "echo devsy-review-install-started\nsleep 120\n")
    devsy.created.add(ws_id)
    proc = subprocess.Popen([*DEVSY, "up", str(project), "--id", ws_id, *HOST_NET], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=cli_env(devsy))
    try:
        assert proc.stderr is not None
        seen = []
        # readline ends at the marker, or at EOF if the up fails first (install.sh itself ends within 120 s).
        while (line := proc.stderr.readline()) and b"devsy-review-install-started" not in line:
            seen.append(line)
        assert line, b"".join(seen[-20:]).decode()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=90) == 128 + signal.SIGINT
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert _labelled_images(docker_client, ws_id) == [], "the interrupted Feature build left labelled images"


def test_reuse_runs_no_hooks_of_a_feature_the_instance_was_not_built_with(devsy: DevsyCli, ws_id: str,
                                                                           guest_image: str, tmp_path: Path) -> None:
    """BUG: a Feature added to devcontainer.json after the instance was built is not installed by a plain `up`
    (reuse), yet its postAttachCommand runs; record.feature_digests names only the installed Features."""
    config: dict = {"image": guest_image, "remoteUser": "root", "features": {}}
    project = make_project(tmp_path / "p", config)
    devsy.up(project, "--id", ws_id, *HOST_NET)
    config["features"] = {"./late": {}}
    make_project(project, config)
    _feature(project, "late", "touch /opt/late-installed\n", postAttachCommand="touch /tmp/late-attached")
    devsy.up(project, "--id", ws_id, *HOST_NET, "--wait-all-hooks")
    seen = devsy.run("exec", ws_id, "--", "sh", "-c",
                     "test -e /opt/late-installed && echo installed; test -e /tmp/late-attached && echo attached")
    assert seen.returncode in (0, 1), seen.text
    out = seen.stdout.decode()
    # Either the Feature is installed (then its hook may run) or neither happens: a hook of an absent Feature is wrong.
    assert out in ("", "installed\nattached\n"), f"guest saw: {out!r}"


def test_feature_container_env_non_ascii_value_reaches_the_guest(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                                 tmp_path: Path) -> None:
    """BUG: containerEnv becomes `ENV NAME=<json.dumps(value)>`; Docker does not decode JSON's \\uXXXX escapes, so
    "café" reaches the guest as the 11 characters caf\\u00e9."""
    project = make_project(tmp_path / "p", {"image": guest_image, "remoteUser": "root",
                                            "features": {"./env": {}}})
    _feature(project, "env", "true\n", containerEnv={"DEVSY_REVIEW_CAFE": "café"})
    devsy.up(project, "--id", ws_id, *HOST_NET)
    seen = devsy.run("exec", ws_id, "--", "sh", "-c", 'printf "%s" "$DEVSY_REVIEW_CAFE"')
    assert seen.returncode == 0, seen.text
    assert seen.stdout.decode() == "café"


def test_local_feature_outside_the_devcontainer_folder_is_refused(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                                  tmp_path: Path, docker_client) -> None:
    """BUG: the reference CLI refuses a local Feature that is not inside the project's .devcontainer folder
    ("Local file path parse error. Resolved path must be a child of the .devcontainer/ folder."); devsy builds any
    host folder a config names ("../../x"), so a cloned repository's config can copy host files into its image."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "devcontainer-feature.json").write_text(json.dumps({"id": "outside", "version": "1.0.0"}))
    (outside / "install.sh").write_text("#!/bin/sh\ntouch /opt/outside-ran\n")
    project = make_project(tmp_path / "p", {"image": guest_image, "features": {"../../outside": {}}})
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode != 0, "a Feature outside .devcontainer was installed"
    assert "Traceback" not in result.text
    assert _labelled_images(docker_client, ws_id) == []


def test_a_symlinked_install_sh_is_installed(devsy: DevsyCli, ws_id: str, guest_image: str, tmp_path: Path) -> None:
    """BUG: load_metadata accepts an install.sh that is a symlink (is_file follows it), but layer._context_files
    leaves every symlink out of the build context, so the build fails with "./install.sh: No such file"."""
    project = make_project(tmp_path / "p", {"image": guest_image, "remoteUser": "root", "features": {"./f": {}}})
    folder = project / ".devcontainer" / "f"
    folder.mkdir()
    (folder / "devcontainer-feature.json").write_text(json.dumps({"id": "f", "version": "1.0.0"}))
    (project / ".devcontainer" / "common.sh").write_text("#!/bin/sh\ntouch /opt/symlinked-ran\n")
    os.symlink("../common.sh", folder / "install.sh")
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode == 0, result.text[-1500:]
    assert devsy.run("exec", ws_id, "--", "test", "-e", "/opt/symlinked-ran").returncode == 0


def test_a_version_string_for_a_feature_without_a_version_option_is_accepted(devsy: DevsyCli, ws_id: str,
                                                                             guest_image: str,
                                                                             tmp_path: Path) -> None:
    """BUG: the string form ("features": {"id": "latest"}) sets the "version" option only when the Feature declares
    one (reference getFeatureValueObject/getFeatureMainProperty); otherwise the defaults apply. devsy turns it into an
    unknown option "version" and refuses the config, with a hint to remove an option the user never wrote."""
    project = make_project(tmp_path / "p", {"image": guest_image, "remoteUser": "root",
                                            "features": {"./nov": "latest"}})
    _feature(project, "nov", 'printf "%s" "$FLAVOUR" > /opt/nov\n',
             options={"flavour": {"type": "string", "default": "plain"}})
    result = devsy.up(project, "--id", ws_id, *HOST_NET, ok=False)
    assert result.returncode == 0, result.stderr.decode()[-600:]
    seen = devsy.run("exec", ws_id, "--", "cat", "/opt/nov")
    assert seen.stdout.decode() == "plain", seen.text


def test_a_token_in_a_tarball_features_url_is_never_shown(devsy: DevsyCli, ws_id: str, guest_image: str,
                                                          tmp_path: Path) -> None:
    """BUG: a tarball Feature URL cannot carry user:password (refused), so a signed URL's query (?token=...) is how
    a credential reaches it; devsy prints the whole id in its progress lines and stores it in the record."""
    import functools
    import http.server
    import tarfile
    import threading

    served = tmp_path / "served"
    served.mkdir()
    with tarfile.open(served / "devcontainer-feature-tz.tgz", "w:gz") as tar:
        for name, text in (("devcontainer-feature.json", json.dumps({"id": "tz", "version": "1.0.0"})),
                           ("install.sh", "#!/bin/sh\ntouch /opt/tz\n")):
            path = tmp_path / name
            path.write_text(text)
            tar.add(path, arcname=name)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        secret = "devsy-review-url-token-0a1b2c"
        url = f"http://127.0.0.1:{server.server_address[1]}/devcontainer-feature-tz.tgz?token={secret}"
        project = make_project(tmp_path / "p", {"image": guest_image, "remoteUser": "root", "features": {url: {}}})
        result = devsy.up(project, "--id", ws_id, *HOST_NET)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert devsy.run("exec", ws_id, "--", "test", "-e", "/opt/tz").returncode == 0
    assert secret not in result.text, "the URL's token is in devsy's output"
    stored = [p for p in devsy.home.rglob("*.json") if secret in p.read_text(errors="replace")]
    assert stored == [], f"the URL's token is stored in {stored}"
