"""A Feature id as written in devcontainer.json's "features", parsed into where the Feature comes from.

The spec's three forms (containers.dev "Features distribution"): a local folder "./x" or "../x" relative to the
devcontainer.json's folder, an OCI reference "registry/namespace/name[:tag|@sha256:digest]", and a tarball URL
"https://host/path/x.tgz" (plain http only to a loopback host: Feature contents run as root in the image).
The deprecated forms (a bare "node", GitHub-release "owner/repo/feature@v") are refused with the form to use.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

from devsy.errors import ConfigError
from devsy.loopback import is_loopback_host
from devsy.redaction import register_secrets

FEATURE_FILE = "devcontainer-feature.json"
# OCI distribution spec grammar: a registry host[:port], path components, a tag or a sha256 digest.
# A registry is told from a namespace as Docker does: it has a dot or a port, or is localhost.
_REGISTRY = re.compile(r"^(localhost|[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+|\[[0-9a-fA-F:]+\])(:[0-9]{1,5})?$"
                       r"|^[A-Za-z0-9-]+:[0-9]{1,5}$")
_COMPONENT = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")


@dataclass(frozen=True)
class FeatureSource:
    """Where one Feature comes from. `id` is the key as written in devcontainer.json's "features"."""

    id: str
    kind: Literal["local", "oci", "tarball"]
    local_path: Path | None = None  # kind == "local": the absolute folder holding devcontainer-feature.json
    registry: str | None = None  # kind == "oci": e.g. "ghcr.io" or "127.0.0.1:5000"
    repository: str | None = None  # kind == "oci": e.g. "devcontainers/features/go"
    tag: str | None = None  # kind == "oci": the tag ("latest" when neither tag nor digest is written)
    digest: str | None = None  # kind == "oci": "sha256:..." when the id pins one
    url: str | None = None  # kind == "tarball"
    local_root: Path | None = None  # kind == "local": the project's .devcontainer folder its files must stay in

    @property
    def shown(self) -> str:
        """The id as devsy shows it: a URL without its query, fragment or userinfo (a signed URL's token)."""
        return shown_id(self.id)

    @property
    def key(self) -> str:
        """A secret-free identity to store (the workspace record): the shown id, and when that hides part of the id,
        a short sha256 of the whole id, so two URLs that differ only in their query stay two keys."""
        shown = self.shown
        return shown if shown == self.id else f"{shown}#{hashlib.sha256(self.id.encode()).hexdigest()[:16]}"

    @property
    def resource(self) -> str:
        """The Feature without its version: what installsAfter, dependsOn and overrideFeatureInstallOrder name."""
        if self.kind == "local":
            return str(self.local_path)
        if self.kind == "oci":
            return f"{self.registry}/{self.repository}".lower()
        return str(self.url)


def parse_feature_id(raw: str, config_dir: Path) -> FeatureSource:
    """The FeatureSource of `raw`; ConfigError naming it when it is none of the spec's forms."""
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(f'"features" has an empty Feature id {raw!r}',
                          hint='name a Feature: "./local-folder", "ghcr.io/owner/features/name:1" or an https URL')
    if raw.startswith(("./", "../")) or raw in (".", ".."):
        return _local(raw, config_dir)
    if raw.startswith(("https://", "http://")):
        return _tarball(raw)
    return _oci(raw)


def _local(raw: str, config_dir: Path) -> FeatureSource:
    folder = (config_dir / raw).resolve()
    allowed = devcontainer_folder(config_dir)
    if not folder.is_relative_to(allowed.resolve()):
        # The reference CLI's rule (containerFeaturesConfiguration.ts, "Resolved path must be a child of the
        # .devcontainer/ folder"): a cloned project's config must not copy other host folders into its image.
        raise ConfigError(f'Feature "{raw}": {folder} is not inside the project\'s .devcontainer folder {allowed}',
                          hint=f"a local Feature is a folder inside {allowed}; move it there and name it by a path "
                          f"relative to {config_dir}")
    if not folder.is_dir():
        raise ConfigError(f'Feature "{raw}": {folder} is not a folder',
                          hint=f"a local Feature is a folder relative to {config_dir} holding {FEATURE_FILE}")
    if not (folder / FEATURE_FILE).is_file():
        raise ConfigError(f'Feature "{raw}": {folder} holds no {FEATURE_FILE}',
                          hint=f"add {FEATURE_FILE} (and install.sh) to the Feature's folder, or fix the path")
    return FeatureSource(id=raw, kind="local", local_path=folder, local_root=allowed.resolve())


def devcontainer_folder(config_dir: Path) -> Path:
    """The project's .devcontainer folder, where local Features must be: the config's folder or its nearest
    ancestor of that name (.devcontainer/devcontainer.json, .devcontainer/NAME/devcontainer.json), else the
    .devcontainer folder next to the config (a .devcontainer.json at the project's root), as the reference takes
    $WORKSPACE_ROOT/.devcontainer."""
    for folder in (config_dir, *config_dir.parents):
        if folder.name == ".devcontainer":
            return folder
    return config_dir / ".devcontainer"


def _tarball(raw: str) -> FeatureSource:
    parts = urlsplit(raw)
    # A signed URL carries its credential in the query (userinfo is refused below): secret in all devsy prints.
    register_secrets([parts.query, parts.fragment, *(value for _, value in parse_qsl(parts.query))])
    shown = shown_id(raw)
    hint = 'a tarball Feature is "https://host/path/devcontainer-feature-NAME.tgz"'
    if not parts.hostname or parts.username or parts.password:
        raise ConfigError(f'Feature "{shown}" is not a valid tarball URL', hint=hint + " (no credentials in it)")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ConfigError(f'Feature "{shown}": plain http is allowed only to this host (loopback)',
                          hint="use https: a Feature's install.sh runs as root in the image")
    if not parts.path.endswith((".tgz", ".tar.gz")):
        raise ConfigError(f'Feature "{shown}": a tarball URL must name a .tgz file', hint=hint)
    return FeatureSource(id=raw, kind="tarball", url=raw)


def _oci(raw: str) -> FeatureSource:
    hint = ('an OCI Feature is "registry/namespace/name" with an optional ":tag" or "@sha256:digest", '
            'e.g. "ghcr.io/devcontainers/features/go:1"; a local one starts with "./"')
    reference, digest, tag = raw, None, None
    if "@" in reference:
        reference, digest = reference.split("@", 1)
        if not _DIGEST.match(digest):
            raise ConfigError(f'Feature "{raw}": "{digest}" is not a sha256 digest', hint=hint)
    registry, _, path = reference.partition("/")
    last = path.rsplit("/", 1)[-1]
    if ":" in last and digest is None:
        path, tag = path.rsplit(":", 1)
        if not _TAG.match(tag):
            raise ConfigError(f'Feature "{raw}": "{tag}" is not a valid tag', hint=hint)
    components = path.split("/") if path else []
    if not _REGISTRY.match(registry) or len(components) < 2:
        raise ConfigError(f'Feature "{raw}" is not a Feature id devsy knows '
                          "(the deprecated short and GitHub-release forms are not supported)", hint=hint)
    bad = [c for c in components if not _COMPONENT.match(c)]
    if bad:
        raise ConfigError(f'Feature "{raw}": "{bad[0]}" is not a valid repository name component (lower case '
                          "letters, digits and . _ - separators)", hint=hint)
    return FeatureSource(id=raw, kind="oci", registry=registry, repository=path,
                         tag=tag or (None if digest else "latest"), digest=digest)


def shown_id(raw: str) -> str:
    """A Feature id as devsy shows it: a URL without its userinfo, query and fragment (where credentials travel);
    any other id as written."""
    if not raw.startswith(("https://", "http://")):
        return raw
    parts = urlsplit(raw)
    netloc = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=netloc, query="", fragment="").geturl()
