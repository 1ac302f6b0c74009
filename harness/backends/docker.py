"""Docker as the harness sees it: containers and volumes found by the `dev.devsy.workspace` label (docker SDK)."""

from __future__ import annotations

from functools import cached_property, partial
from typing import Callable

import docker
import docker.errors
from docker.models.containers import Container

from harness.backends import (
    LABEL_WORKSPACE,
    BackendExec,
    BackendInstance,
    BackendUnavailable,
    LabelMatch,
    SweepOutcome,
)

API_TIMEOUT = 60


class DockerInspector:
    backend = "docker"

    @cached_property
    def client(self) -> docker.DockerClient:
        try:
            client = docker.from_env(timeout=API_TIMEOUT)
            client.ping()
        except docker.errors.DockerException as exc:
            raise BackendUnavailable(f"the Docker daemon does not answer: {exc}") from exc
        return client

    def _containers(self, workspace_id: str) -> list[Container]:
        # ignore_removed: a container removed between the list and its inspect (another run, a cleanup) is gone.
        return self.client.containers.list(all=True, filters={"label": f"{LABEL_WORKSPACE}={workspace_id}"},
                                           ignore_removed=True)

    def instances(self, workspace_id: str) -> list[BackendInstance]:
        """Every container labelled with this workspace id (devsy should keep at most one)."""
        return [_instance(container) for container in self._containers(workspace_id)]

    def volumes(self, workspace_id: str) -> list[str]:
        return [v.name for v in self.client.volumes.list(filters={"label": f"{LABEL_WORKSPACE}={workspace_id}"})]

    def instance_logs(self, workspace_id: str, lines: int = 200) -> str:
        parts = []
        for container in self._containers(workspace_id):
            text = container.logs(tail=lines).decode("utf-8", "replace")
            parts.append(f"--- docker logs {container.name} (last {lines} lines) ---\n{text}")
        return "\n".join(parts) or f"(no container labelled {LABEL_WORKSPACE}={workspace_id})"

    def exec(self, workspace_id: str, argv: list[str]) -> BackendExec:
        """`docker exec` in the workspace's one container, without a user: the container's own (Config.User)."""
        containers = self._containers(workspace_id)
        if len(containers) != 1:
            raise BackendUnavailable(f"expected one container labelled {LABEL_WORKSPACE}={workspace_id}, docker has "
                                     f"{[c.name for c in containers]}")
        result = containers[0].exec_run(argv, demux=True)
        stdout, stderr = result.output or (None, None)
        return BackendExec(int(result.exit_code), (stdout or b"").decode("utf-8", "replace"),
                           (stderr or b"").decode("utf-8", "replace"))

    def remove_workspace(self, workspace_id: str) -> list[str]:
        """Force-remove the workspace's containers, then its volumes; already-gone objects are fine."""
        removed = []
        for container in self._containers(workspace_id):
            _ignore_gone(partial(container.remove, force=True, v=True))
            removed.append(f"container {container.name}")
        for volume in self.client.volumes.list(filters={"label": f"{LABEL_WORKSPACE}={workspace_id}"}):
            _ignore_gone(partial(volume.remove, force=True))
            removed.append(f"volume {volume.name}")
        return removed

    def sweep(self, owned: LabelMatch, keep: LabelMatch) -> SweepOutcome:
        """Remove every container, then every volume, whose labels `owned` accepts and `keep` does not."""
        outcome = SweepOutcome()
        for container in self.client.containers.list(all=True, ignore_removed=True):
            labels = container.labels or {}
            if owned(labels) and not keep(labels):
                _remove(outcome, f"container {container.name}", partial(container.remove, force=True, v=True))
        for volume in self.client.volumes.list():
            labels = volume.attrs.get("Labels") or {}
            if owned(labels) and not keep(labels):
                _remove(outcome, f"volume {volume.name}", partial(volume.remove, force=True))
        return outcome


def _instance(container: Container) -> BackendInstance:
    attrs = container.attrs
    return BackendInstance(
        id=container.id,
        name=container.name,
        created_at=str(attrs.get("Created", "")),
        status=str(attrs.get("State", {}).get("Status", container.status)),
        labels=dict(container.labels or {}),
    )


def _ignore_gone(action: Callable[[], object]) -> None:
    try:
        action()
    except docker.errors.NotFound:
        pass


def _remove(outcome: SweepOutcome, what: str, action: Callable[[], object]) -> None:
    try:
        action()
        outcome.removed.append(what)
    except docker.errors.NotFound:
        outcome.removed.append(f"{what} (already gone)")
    except docker.errors.APIError as exc:
        outcome.errors.append(f"{what}: {exc}")
