"""The Docker engine as tests see it: is it reachable (with the evidence when not), and what a workspace owns in it."""

from __future__ import annotations

import io
import os

from harness.commands import run_bounded, tail

ENGINE_PROBE = ["docker", "info"]  # what ci/bootstrap.sh asks; the CLI honours DOCKER_HOST like the SDK does
ENGINE_PROBE_TIMEOUT_S = 30.0
_engine_evidence: list[str] = []  # [] = not probed yet; [""] = the engine answers; [text] = why it does not


def engine_unavailable() -> str:
    """"" when the Docker engine answers `docker info`, else the evidence why not (probed once per session)."""
    if not _engine_evidence:
        _engine_evidence.append(_probe_engine())
    return _engine_evidence[0]


def _probe_engine() -> str:
    where = os.environ.get("DOCKER_HOST", "") or "the default socket"
    command = f"`{' '.join(ENGINE_PROBE)}` (DOCKER_HOST={where})"
    try:
        done = run_bounded(ENGINE_PROBE, timeout=ENGINE_PROBE_TIMEOUT_S)
    except OSError as exc:  # no docker CLI on PATH
        return f"{command} could not start: {exc}"
    if done.timed_out:
        return f"{command} did not answer within {ENGINE_PROBE_TIMEOUT_S:.0f} s: {tail(done.stderr, 5) or '(no output)'}"
    if done.exit_code != 0:
        first = "\n".join((done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()[:5])
        return f"{command} exited {done.exit_code} in {done.duration:.1f} s: {first or '(no output)'}"
    return ""


def remove_owned(client, workspace_id: str) -> None:
    label = f"dev.devsy.workspace={workspace_id}"
    for container in client.containers.list(all=True, filters={"label": label}):
        container.remove(force=True, v=True)
    for volume in client.volumes.list(filters={"label": label}):
        volume.remove(force=True)
    from devsy.devcontainer.image_prepare import remove_built_images

    remove_built_images(workspace_id)  # built from a test's Dockerfile, untagged layers of a failed build too


def containers_of(client, workspace_id: str) -> list:
    return client.containers.list(all=True, filters={"label": f"dev.devsy.workspace={workspace_id}"})


def volumes_of(client, workspace_id: str) -> list:
    return client.volumes.list(filters={"label": f"dev.devsy.workspace={workspace_id}"})


ONE_SHOT_WAIT_S = 60


def run_once(client, image: str, argv: list[str], user: str = "") -> tuple[int, str]:
    """Run `argv` in a fresh container of `image` (host networking, as everything here); (exit code, combined
    output). The container is always removed."""
    import uuid

    container = client.containers.create(image, argv, user=user or None, network_mode="host",
                                         name=f"devsy-test-{uuid.uuid4().hex[:12]}")
    try:
        container.start()
        status = container.wait(timeout=ONE_SHOT_WAIT_S)
        return status["StatusCode"], container.logs(stdout=True, stderr=True).decode()
    finally:
        container.remove(force=True)


def build_test_image(client, dockerfile: str, tag: str) -> str:
    """Build `dockerfile` (no context) as `tag` on the host network; a failed step's container is removed too."""
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True, network_mode="host")
    return tag
