"""The owned loopback OCI registry fixture: a push, pulls counted by who pulled, auth, a taken port, stop."""

from __future__ import annotations

import contextlib
import secrets
import socket
import urllib.error
import urllib.request

import docker.errors
import psutil
import pytest

from fixtures.oci_registry import OciRegistry, OciRegistryError, free_loopback_port, oci_registry  # noqa: F401

GUEST = "devsy-guest:bookworm"


def _unique(name: str) -> str:
    return f"devsy-test/{name}-{secrets.token_hex(4)}"


def _status_of_v2(registry: OciRegistry) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{registry.host}/v2/", timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@contextlib.contextmanager
def _pulled(client, ref: str, **kwargs):
    """Pull `ref` and untag it afterwards (it shares the guest image's layers: nothing else is removed)."""
    try:
        yield client.images.pull(ref, **kwargs)
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(ref)


@pytest.mark.docker
def test_docker_pull_is_counted_with_dockers_user_agent(oci_registry: OciRegistry, docker_client, guest_image):
    repo = _unique("pull")
    ref = oci_registry.push(guest_image, f"{repo}:v1")
    assert ref == f"127.0.0.1:{oci_registry.port}/{repo}:v1"
    pushed = oci_registry.requests()
    assert any(r.method == "PUT" and r.path == f"/v2/{repo}/manifests/v1" and r.user_agent.startswith("skopeo/")
               for r in pushed), pushed
    oci_registry.mark()
    assert oci_registry.requests() == []  # the push is behind the mark

    with _pulled(docker_client, ref):
        reads = oci_registry.manifest_reads(repo) + oci_registry.manifest_reads(repo, method="HEAD")
        assert reads > 0
        manifest_requests = [r for r in oci_registry.requests() if "/manifests/" in r.path]
        assert manifest_requests and all("docker/" in r.user_agent for r in manifest_requests), manifest_requests
        assert oci_registry.manifest_reads("devsy-test/another-repo") == 0
    assert not docker_client.images.list(name=f"{oci_registry.host}/{repo}")  # the pulled tag is gone again


@pytest.mark.docker
def test_auth_refuses_anonymous_clients_and_keeps_the_password_out_of_output(docker_client, guest_image):
    password = secrets.token_urlsafe(18)
    repo = _unique("auth")
    with OciRegistry(auth=("devsy", password)) as registry:
        ref = registry.push(guest_image, f"{repo}:v1")
        assert _status_of_v2(registry) == 401
        registry.mark()
        with pytest.raises(docker.errors.APIError), _pulled(docker_client, ref):
            pass
        refused = registry.requests()  # refused, not missing: Docker got a 401 and asked no further
        assert refused and all(r.status == 401 and "docker/" in r.user_agent for r in refused), refused
        with _pulled(docker_client, ref, auth_config={"username": "devsy", "password": password}):
            assert registry.manifest_reads(repo) + registry.manifest_reads(repo, method="HEAD") > 0
        with pytest.raises(OciRegistryError) as failed:
            registry.push(f"devsy-test/no-such-image-{secrets.token_hex(4)}:none", f"{repo}:v2")
        output = registry.log_text() + str(failed.value) + failed.value.hint + ref
        assert "skopeo copy" in str(failed.value)
        assert password not in output
        assert password not in (registry.directory / "config.yml").read_text()


def test_a_taken_port_is_replaced_by_another(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        offered = iter([busy])
        with OciRegistry(port_picker=lambda: next(offered, None) or free_loopback_port()) as registry:
            assert registry.rejected_ports == [busy]
            assert registry.port != busy
            assert _status_of_v2(registry) == 200

        with pytest.raises(OciRegistryError) as exhausted:
            OciRegistry(port_picker=lambda: busy, start_attempts=3).start()
        assert f"[{busy}, {busy}, {busy}]" in str(exhausted.value)


def test_a_start_that_fails_for_another_reason_is_not_retried():
    attempts = []

    def picker() -> int:
        attempts.append(1)
        return 70000  # not a port: the registry exits with its own error, which is not "address in use"

    with pytest.raises(OciRegistryError) as failed:
        OciRegistry(port_picker=picker).start()
    assert len(attempts) == 1
    assert "docker-registry exited" in str(failed.value)
    assert "70000" in str(failed.value)  # the registry's own log line is quoted


def test_stop_leaves_no_registry_process_and_no_directory():
    registry = OciRegistry().start()
    process = psutil.Process(registry.pid)
    config = str(registry.directory / "config.yml")
    directory = registry.directory
    assert config in process.cmdline()
    registry.stop()
    assert not process.is_running()  # is_running compares the start time too: a reused pid is not ours
    assert not [p for p in psutil.process_iter(["cmdline"]) if config in (p.info["cmdline"] or [])]
    assert not directory.exists()
    registry.stop()  # a second stop is a no-op
