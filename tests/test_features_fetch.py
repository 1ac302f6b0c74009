"""Fetching OCI-published and tarball Features (devsy/devcontainer/features/fetch.py) and devcontainer-lock.json
(lockfile.py). Against an owned loopback registry (Debian's docker-registry; its access log counts every request)
holding Features the tests publish, and a loopback HTTP server for tarballs; nothing is mocked."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from devsy.devcontainer.features.fetch import fetch_feature
from devsy.devcontainer.features.lockfile import (LockEntry, lock_entry, lockfile_path, read_lockfile,
                                                  render_lockfile, update_lockfile, write_lockfile)
from devsy.devcontainer.features.source import parse_feature_id
from devsy.errors import ConfigError, ImageError
from fixtures.oci_registry import OciRegistry, feature_tarball, free_loopback_port

PASSWORD = "feature-pa55-never-shown"
METADATA = {"id": "hello", "version": "1.2.0", "options": {"greeting": {"type": "string", "default": "hi"}}}


def _files(marker: str = "one") -> dict[str, str]:
    return {"devcontainer-feature.json": json.dumps(METADATA),
            "install.sh": f"#!/bin/sh\necho {marker} > /tmp/hello-marker\n"}


@pytest.fixture
def registry() -> Iterator[OciRegistry]:
    with OciRegistry() as started:
        yield started


@pytest.fixture(autouse=True)
def no_docker_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Docker config: no user's credentials take part (tests that need some write them here)."""
    folder = tmp_path / "docker-config"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"auths": {}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(folder))
    return folder


def _source(feature_id: str):
    return parse_feature_id(feature_id, Path("/"))


def _blob_reads(registry: OciRegistry) -> int:
    return sum(1 for request in registry.requests() if "/blobs/" in request.path)


# -- OCI ---------------------------------------------------------------------------------------------------------

def test_fetch_by_tag_extracts_the_feature_and_a_second_fetch_rereads_only_the_manifest(registry, tmp_path):
    digest = registry.push_feature("features/hello:1", _files())
    registry.mark()
    fetched = fetch_feature(_source(registry.ref("features/hello:1")), tmp_path / "cache")
    assert fetched.digest == digest
    assert json.loads((fetched.folder / "devcontainer-feature.json").read_text()) == METADATA
    assert (fetched.folder / "install.sh").stat().st_mode & 0o111, "install.sh keeps its executable bit"
    assert (registry.manifest_reads("features/hello"), _blob_reads(registry)) == (1, 1)

    # A tag is resolved anew every time (the reference CLI does too); a digest already cached is not downloaded.
    registry.mark()
    again = fetch_feature(_source(registry.ref("features/hello:1")), tmp_path / "cache")
    assert (again.folder, again.digest) == (fetched.folder, digest)
    assert (registry.manifest_reads("features/hello"), _blob_reads(registry)) == (1, 0)


def test_fetch_by_digest_and_a_cached_or_pinned_second_fetch_asks_the_registry_nothing(registry, tmp_path):
    digest = registry.push_feature("features/hello:1", _files())
    registry.mark()
    by_digest = _source(f"{registry.host}/features/hello@{digest}")
    fetched = fetch_feature(by_digest, tmp_path / "cache")
    assert fetched.digest == digest and (fetched.folder / "install.sh").is_file()
    assert registry.manifest_reads("features/hello") == 1

    registry.mark()
    assert fetch_feature(by_digest, tmp_path / "cache").folder == fetched.folder
    by_tag = _source(registry.ref("features/hello:1"))
    assert fetch_feature(by_tag, tmp_path / "cache", pinned=digest).folder == fetched.folder  # devcontainer-lock.json
    assert fetch_feature(by_tag, tmp_path / "cache", recorded=digest).folder == fetched.folder  # an earlier up's
    assert registry.requests() == []


def test_a_lockfile_pin_is_read_by_digest_and_an_id_pinned_to_another_digest_is_refused(registry, tmp_path):
    pinned = registry.push_feature("features/hello:1", _files("one"))
    moved = registry.push_feature("features/hello:1", _files("two"))
    assert moved != pinned
    by_tag = _source(registry.ref("features/hello:1"))

    # As the reference CLI does, the pin is what is read (by digest), not the tag: the lockfile's content comes back.
    registry.mark()
    fetched = fetch_feature(by_tag, tmp_path / "cache", pinned=pinned)
    assert fetched.digest == pinned and "echo one" in (fetched.folder / "install.sh").read_text()
    assert [r.path for r in registry.requests() if "/manifests/" in r.path] == \
        [f"/v2/features/hello/manifests/{pinned}"]

    # A recorded digest (not a pin) whose folder is not cached is no error: the tag is resolved anew.
    assert fetch_feature(by_tag, tmp_path / "other", recorded=pinned).digest == moved

    # An id by digest that the lockfile pins to another digest is refused before any request.
    registry.mark()
    with pytest.raises(ConfigError) as refused:
        fetch_feature(_source(f"{registry.host}/features/hello@{moved}"), tmp_path / "third", pinned=pinned)
    message = str(refused.value)
    assert f"{registry.host}/features/hello@{moved}" in message and pinned in message
    assert "devcontainer-lock.json" in refused.value.hint
    assert registry.requests() == [] and not (tmp_path / "third").exists()

    # A pin the registry does not hold is a 404 naming the Feature, pointing at the lockfile.
    gone = "sha256:" + "e" * 64
    with pytest.raises(ImageError) as missing:
        fetch_feature(by_tag, tmp_path / "fourth", pinned=gone)
    assert f"Feature {by_tag.id} was not found" in str(missing.value) and "devcontainer-lock.json" in missing.value.hint


def test_an_unreachable_registry_is_an_error_naming_the_feature(tmp_path):
    port = free_loopback_port()  # nothing listens there: connection refused
    feature_id = f"127.0.0.1:{port}/features/hello:1"
    with pytest.raises(ImageError) as failed:
        fetch_feature(_source(feature_id), tmp_path / "cache")
    assert f"Feature {feature_id}" in str(failed.value) and "could not be reached" in str(failed.value)
    assert "Feature id" in failed.value.hint


def test_a_missing_feature_is_an_error_naming_it(registry, tmp_path):
    registry.push_feature("features/hello:1", _files())
    for missing in ("features/hello:2", "features/absent:1"):
        feature_id = registry.ref(missing)
        with pytest.raises(ImageError) as failed:
            fetch_feature(_source(feature_id), tmp_path / "cache")
        assert f"Feature {feature_id} was not found" in str(failed.value) and "HTTP 404" in str(failed.value)
        assert failed.value.hint == "check the Feature id in devcontainer.json"


def test_a_private_registry_uses_dockers_credentials_and_never_shows_them(tmp_path, no_docker_credentials):
    with OciRegistry(auth=("alice", PASSWORD)) as private:
        digest = private.push_feature("features/hello:1", _files())
        feature_id = private.ref("features/hello:1")
        with pytest.raises(ImageError) as refused:
            fetch_feature(_source(feature_id), tmp_path / "cache")
        shown = f"{refused.value}\n{refused.value.hint}"
        assert f"Feature {feature_id}" in shown and "HTTP 401" in shown and "docker login" in shown

        wrong = base64.b64encode(b"alice:not-the-password").decode()
        (no_docker_credentials / "config.json").write_text(json.dumps({"auths": {private.host: {"auth": wrong}}}))
        with pytest.raises(ImageError) as wrong_login:
            fetch_feature(_source(feature_id), tmp_path / "cache")
        assert "HTTP 401" in str(wrong_login.value) and "not-the-password" not in str(wrong_login.value)

        right = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
        (no_docker_credentials / "config.json").write_text(json.dumps({"auths": {private.host: {"auth": right}}}))
        assert fetch_feature(_source(feature_id), tmp_path / "cache").digest == digest
    for error in (refused.value, wrong_login.value):
        assert PASSWORD not in f"{error}{error.hint}" and right not in f"{error}{error.hint}"


def test_an_archive_that_writes_outside_its_folder_is_refused(registry, tmp_path):
    outside = tmp_path / "escaped-by-link"
    for name, member in (("dotdot", tarfile.TarInfo("../escaped")), ("link", tarfile.TarInfo("escape"))):
        if name == "link":  # a symlink leading out of the folder (a later member could write through it)
            member.type, member.linkname = tarfile.SYMTYPE, str(outside)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for file_name, content in _files().items():
                info = tarfile.TarInfo(file_name)
                info.size = len(content.encode())
                tar.addfile(info, io.BytesIO(content.encode()))
            member.size = 0 if member.issym() else 6
            tar.addfile(member, None if member.issym() else io.BytesIO(b"owned\n"))
        digest = registry.push_feature(f"features/{name}:1", layer=buffer.getvalue())
        cache = tmp_path / f"cache-{name}"
        with pytest.raises(ConfigError) as refused:
            fetch_feature(_source(registry.ref(f"features/{name}:1")), cache)
        assert registry.ref(f"features/{name}:1") in str(refused.value) and "refused" in str(refused.value)
        assert not (cache / "oci" / digest.replace(":", "-")).exists()
        assert list((cache / "oci").iterdir()) == [], "the staging folder is removed"
    assert not list(tmp_path.rglob("escaped*")), "nothing was written outside the Feature's folder"


def test_a_manifest_without_a_feature_layer_or_an_archive_without_install_sh_is_refused(registry, tmp_path):
    registry.push_feature("features/image:1", _files(), config_media_type="application/vnd.oci.image.config.v1+json")
    with pytest.raises(ConfigError, match="features/image:1 is not a Dev Container Feature: .*config media type"):
        fetch_feature(_source(registry.ref("features/image:1")), tmp_path / "cache")
    registry.push_feature("features/noinstall:1", {"devcontainer-feature.json": json.dumps(METADATA)})
    with pytest.raises(ConfigError, match="features/noinstall:1: its archive has no install.sh"):
        fetch_feature(_source(registry.ref("features/noinstall:1")), tmp_path / "cache")


# -- tarball URLs ----------------------------------------------------------------------------------------------

class _TarballServer:
    """http.server on 127.0.0.1 in a thread, serving `files` (path -> bytes) and counting the requests."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files, self.paths = files, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                outer.paths.append(self.path)
                body = outer.files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *_: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def __enter__(self) -> _TarballServer:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def test_a_tarball_url_is_fetched_pinned_by_the_files_sha256(tmp_path):
    tarball = feature_tarball(_files())
    digest = "sha256:" + hashlib.sha256(tarball).hexdigest()
    with _TarballServer({"/devcontainer-feature-hello.tgz": tarball}) as server:
        source = _source(server.url("/devcontainer-feature-hello.tgz"))
        fetched = fetch_feature(source, tmp_path / "cache")
        assert fetched.digest == digest and (fetched.folder / "install.sh").is_file()
        assert server.paths == ["/devcontainer-feature-hello.tgz"]

        assert fetch_feature(source, tmp_path / "cache", pinned=digest).folder == fetched.folder
        assert len(server.paths) == 1, "a pinned, cached tarball is not downloaded again"

        other = "sha256:" + "0" * 64
        with pytest.raises(ConfigError) as refused:
            fetch_feature(source, tmp_path / "fresh", pinned=other)
        assert source.id in str(refused.value) and other in str(refused.value) and digest in str(refused.value)

        missing = _source(server.url("/absent.tgz"))
        with pytest.raises(ImageError) as not_found:
            fetch_feature(missing, tmp_path / "cache")
        assert missing.id in str(not_found.value) and "HTTP 404" in str(not_found.value)


def test_a_tarball_server_that_is_not_listening_is_an_error_naming_the_feature(tmp_path):
    feature_id = f"http://127.0.0.1:{free_loopback_port()}/devcontainer-feature-hello.tgz"
    with pytest.raises(ImageError) as failed:
        fetch_feature(_source(feature_id), tmp_path / "cache")
    assert feature_id in str(failed.value) and "could not be downloaded" in str(failed.value)


# -- devcontainer-lock.json ------------------------------------------------------------------------------------

def test_the_lockfile_is_written_as_the_reference_writes_it_and_read_back(registry, tmp_path):
    config = tmp_path / "devcontainer.json"
    digest = registry.push_feature("features/hello:1", _files())
    oci = fetch_feature(_source(registry.ref("features/hello:1")), tmp_path / "cache")
    tarball = feature_tarball(_files("two"))
    with _TarballServer({"/devcontainer-feature-b.tgz": tarball}) as server:
        direct = fetch_feature(_source(server.url("/devcontainer-feature-b.tgz")), tmp_path / "cache")
    entries = [lock_entry(direct.source, direct.digest, "2.0.0"),
               lock_entry(oci.source, oci.digest, "1.2.0", ["ghcr.io/devcontainers/features/common-utils"])]

    assert write_lockfile(config, entries) is False and not lockfile_path(config).exists(), \
        "no lockfile is created unless asked (the reference without --experimental-lockfile)"
    assert write_lockfile(config, entries, create=True) is True
    text = lockfile_path(config).read_text()
    expected = {"features": {  # sorted by id: "127.0.0.1:PORT/..." before "http://..."
        oci.source.id: {"version": "1.2.0", "resolved": f"{registry.host}/features/hello@{digest}",
                        "integrity": digest, "dependsOn": ["ghcr.io/devcontainers/features/common-utils"]},
        direct.source.id: {"version": "2.0.0", "resolved": direct.source.id, "integrity": direct.digest},
    }}
    assert text == json.dumps(expected, indent=2) + "\n"  # JSON.stringify(lockfile, null, 2) + "\n", ids sorted
    assert read_lockfile(config) == {direct.source.id: direct.digest, oci.source.id: digest}

    before = lockfile_path(config).stat().st_mtime_ns
    assert write_lockfile(config, reversed(entries)) is False  # same content: not rewritten
    assert lockfile_path(config).stat().st_mtime_ns == before
    assert write_lockfile(config, entries[:1]) is True  # an existing lockfile is kept up to date
    assert list(read_lockfile(config)) == [direct.source.id]
    assert lockfile_path(config).stat().st_mode & 0o777 == 0o644


def test_the_lockfile_path_and_a_malformed_lockfile(tmp_path):
    assert lockfile_path(tmp_path / ".devcontainer.json") == tmp_path / ".devcontainer-lock.json"
    assert lockfile_path(tmp_path / ".devcontainer" / "devcontainer.json") == \
        tmp_path / ".devcontainer" / "devcontainer-lock.json"
    config = tmp_path / "devcontainer.json"
    assert read_lockfile(config) == {}
    for text, what in (("{not json", "not valid JSON"), ('{"feature": {}}', 'no "features"'),
                       ('{"features": {"a/b/c:1": {"integrity": "md5:x"}}}', '"a/b/c:1" has no sha256')):
        lockfile_path(config).write_text(text)
        with pytest.raises(ConfigError, match=what) as malformed:
            read_lockfile(config)
        assert str(lockfile_path(config)) in str(malformed.value)
    rendered = render_lockfile([LockEntry("B/x", "1", "r", "sha256:" + "1" * 64),
                                LockEntry("a/x", "1", "r", "sha256:" + "2" * 64)])
    assert rendered.index('"a/x"') < rendered.index('"B/x"'), "ids compare as localeCompare does, case aside"


def test_resolved_features_update_an_existing_lockfile(registry, tmp_path, monkeypatch):
    from devsy.devcontainer.features.model import UserFeature
    from devsy.devcontainer.features.resolve import resolve_features

    monkeypatch.setenv("DEVSY_CACHE_DIR", str(tmp_path / "devsy-cache"))
    digest = registry.push_feature("features/hello:1", _files())
    project = tmp_path / "project"
    # A .devcontainer.json at the root: local Features are inside .devcontainer/ (the reference CLI's rule).
    (project / ".devcontainer" / "local").mkdir(parents=True)
    for name, content in _files().items():
        (project / ".devcontainer" / "local" / name).write_text(content.replace('"hello"', '"local"'))
    config = project / ".devcontainer.json"
    features = [UserFeature(_source(registry.ref("features/hello:1")), {}),
                UserFeature(parse_feature_id("./.devcontainer/local", project), {})]
    resolved = resolve_features(features, [], project)
    assert update_lockfile(config, resolved) is False and not lockfile_path(config).exists()
    assert update_lockfile(config, resolved, create=True) is True
    assert json.loads((project / ".devcontainer-lock.json").read_text()) == {"features": {registry.ref(
        "features/hello:1"): {"version": "1.2.0", "resolved": f"{registry.host}/features/hello@{digest}",
                               "integrity": digest}}}, "a local Feature has no entry"
