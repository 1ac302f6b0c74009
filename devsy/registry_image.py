"""Reading an image's config (its USER) and layers straight from its registry, for backends that pull images themselves.

Shared by the devcontainer layer (image_prepare.py reads USER) and the MicroSandbox driver (msb pull, the image's
accounts), so it sits below both.

MicroSandbox pulls a registry image with `msb pull`, never through Docker, so the host cannot ask a Docker engine who
the image's USER is (the default remoteUser). It reads the image's manifest and config blob from the registry
instead, as the Go host does with go-containerregistry: two GETs (three for a multi-platform index), bounded. The
layers are streamed the same way (top layer first), for reading the image's accounts before msb boots it.

Why not the `oras` client library: oras 0.2.43 retries every failure five times with sleeps of 3 to 83 s and sets no
request timeout (a refused credential hung for more than 120 s here), which breaks devsy's rule that every wait is
bounded, and it only reads ~/.docker/config.json. Credentials come from docker-py's own resolver instead (DOCKER_CONFIG,
~/.docker/config.json, credsStore and credHelpers): the same credentials `docker pull` and `msb pull` use. They are
sent only to the registry (or the token realm it names), never printed, logged or stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import platform
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import docker.auth
import docker.errors
import docker.utils
import requests
import urllib3.exceptions

from devsy.errors import ImageError
from devsy.loopback import is_loopback_host
from devsy.redaction import redact_url

REQUEST_TIMEOUT_S = 30.0
_MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
_INDEX_TYPES = _MANIFEST_TYPES[:2]
_DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


@dataclass(frozen=True)
class RegistryImage:
    ref: str
    registry: str  # host[:port] as written in the reference ("docker.io" for Docker Hub)
    insecure: bool  # plain HTTP: a loopback registry, as Docker allows by default
    user: str  # the image config's USER ("" = root)
    config_digest: str
    pinned: str  # `ref` by the digest of the manifest read: what the backend must pull, so USER matches the image



@dataclass(frozen=True)
class ImageReference:
    registry: str
    repository: str
    reference: str  # a tag or a digest

    @property
    def insecure(self) -> bool:
        return is_loopback(self.registry)

    @property
    def api_base(self) -> str:
        host = "registry-1.docker.io" if self.registry in _DOCKER_HUB else self.registry
        if host.count(":") > 1 and not host.startswith("["):
            host = f"[{host}]"  # a bare IPv6 address in a URL
        return f"{'http' if self.insecure else 'https'}://{host}/v2/{self.repository}"


def registry_host(registry: str) -> str:
    """The host part of `registry` (host, host:port, [v6], [v6]:port or a bare v6 address), lower-cased."""
    if registry.startswith("["):
        return registry[1:registry.find("]")].lower() if "]" in registry else registry.lower()
    if registry.count(":") == 1:
        return registry.split(":", 1)[0].lower()
    return registry.lower()  # a name, or a bare IPv6 address (it cannot carry a port without brackets)


def is_loopback(registry: str) -> bool:
    """Whether `registry` (host[:port]) is this machine: Docker's built-in insecure range, 127.0.0.0/8 (and ::1)."""
    return is_loopback_host(registry_host(registry))


def parse_reference(ref: str) -> ImageReference:
    """`[registry/]repository[:tag][@digest]` split as Docker does (a digest wins over a tag). InvalidRepository for
    what Docker would refuse: a repository path must be lower case."""
    name, reference = docker.utils.parse_repository_tag(ref)
    if reference and reference.startswith("sha256:") and ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]  # name:tag@digest: the digest names the image
    registry, repository = docker.auth.resolve_repository_name(name)
    if repository != repository.lower() or not repository:
        raise docker.errors.InvalidRepository(f"the repository {repository!r} must be lower case")
    if registry in _DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    return ImageReference(registry, repository, reference or "latest")


def pinned_reference(ref: str, digest: str) -> str:
    """`ref` naming the image by `digest` instead of its tag (`registry/repo@sha256:...`)."""
    name, _ = docker.utils.parse_repository_tag(ref)
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name.rsplit(":", 1)[0]
    return f"{name}@{digest}"


def read_image_config(ref: str, *, timeout: float = REQUEST_TIMEOUT_S) -> RegistryImage:
    """The USER of `ref`'s config for this host's platform, read from its registry. Raises ImageError naming the
    image and the registry, with what to do."""
    parsed = _parse(ref)
    with _RegistrySession(parsed, timeout) as session:
        manifest, manifest_digest = _image_manifest(session, ref)
        config_digest = (manifest.get("config") or {}).get("digest") if isinstance(manifest.get("config"), dict) \
            else None
        if not isinstance(config_digest, str) or not config_digest:
            raise ImageError(f"registry {parsed.registry} answered for image {ref} with a manifest that names no "
                             "config", hint="check that the reference names a container image")
        config = session.get_json(f"blobs/{config_digest}", accept=("*/*",), what="image config")
    settings = config.get("config")
    user = str(settings.get("User") or "") if isinstance(settings, dict) else ""
    return RegistryImage(ref, parsed.registry, parsed.insecure, user, config_digest,
                         pinned_reference(ref, manifest_digest))


@contextlib.contextmanager
def open_layers(ref: str, *, timeout: float = REQUEST_TIMEOUT_S) -> Iterator[Iterator[IO[bytes]]]:
    """`ref`'s layer blobs for this host's platform, top layer first, each a stream opened only when the caller gets
    to it (so a caller that stops early downloads no more layers). Compression is the blob's own (tar or gzip)."""
    parsed = _parse(ref)
    with _RegistrySession(parsed, timeout) as session:
        manifest, _ = _image_manifest(session, ref)
        layers = manifest.get("layers")
        if not isinstance(layers, list):
            raise ImageError(f"registry {parsed.registry} answered for image {ref} with a manifest that lists no "
                             "layers", hint="check that the reference names a container image")
        if not all(isinstance(layer, dict) for layer in layers):
            raise ImageError(f"registry {parsed.registry} answered for image {ref} with a malformed layer list",
                             hint="check that the reference names a container image")
        yield (session.open_blob(str(layer.get("digest", "")), str(layer.get("mediaType", "")))
               for layer in reversed(layers))


OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class Artifact:
    """An OCI artifact's manifest as read, and the digest of the bytes the registry sent (what pins it)."""

    manifest: dict[str, Any]
    digest: str


class ArtifactReader:
    """One artifact's manifest and blobs over one session (the registry's 401 challenge answered once), for
    non-image artifacts such as Dev Container Features. Messages name `subject` (e.g. "Feature ID") and hint at
    `name_hint` when the reference is wrong."""

    def __init__(self, ref: str, *, subject: str, name_hint: str, timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.ref = _parse(ref)
        self.subject = subject
        self._session = _RegistrySession(self.ref, timeout, subject=subject, name_hint=name_hint)

    def __enter__(self) -> ArtifactReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._session.__exit__(*exc)

    def manifest(self, accept: tuple[str, ...] = (OCI_MANIFEST,)) -> Artifact:
        """The manifest of the reference. Its digest is the sha256 of the bytes received, so a reference by digest
        is checked against what was sent (a registry cannot substitute another manifest)."""
        response = self._session._authorized_get(f"manifests/{self.ref.reference}", accept, "manifest")
        body = self._session._json(response, "manifest")
        digest = "sha256:" + hashlib.sha256(response.content).hexdigest()
        if _DIGEST.fullmatch(self.ref.reference) and digest != self.ref.reference:
            raise ImageError(f"registry {self.ref.registry} sent a manifest for {self.subject} whose digest is "
                             f"{digest}, not the {self.ref.reference} asked for",
                             hint="the registry is serving corrupt content; check it")
        return Artifact(body, digest)

    def save_blob(self, digest: str, target: IO[bytes], *, max_bytes: int) -> None:
        """Stream the blob `digest` into `target`, checking its size and sha256 against `digest`."""
        if not _DIGEST.fullmatch(digest):
            raise ImageError(f"the manifest of {self.subject} names a blob by {digest!r}, not a sha256 digest",
                             hint="republish it with a standard OCI client")
        response = self._session._authorized_get(f"blobs/{digest}", ("*/*",), "layer", stream=True)
        try:
            got = copy_digested(response.raw.stream(1 << 16, decode_content=False), target, max_bytes=max_bytes,
                                too_large=ImageError(f"the layer of {self.subject} is larger than {max_bytes} bytes",
                                                     hint="a Feature is a small tar of scripts; check the reference"))
        except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
            raise ImageError(f"reading the layer of {self.subject} from registry {self.ref.registry} failed: "
                             f"{type(exc).__name__}", hint="retry; check that the registry is reachable") from None
        finally:
            response.close()
        if got != digest:
            raise ImageError(f"registry {self.ref.registry} sent a layer for {self.subject} whose sha256 is not "
                             f"{digest}", hint="the registry is serving corrupt content; check it")


def copy_digested(chunks: Iterable[bytes], target: IO[bytes], *, max_bytes: int, too_large: Exception) -> str:
    """Copy `chunks` to `target`; their "sha256:..." digest. `too_large` is raised past `max_bytes`."""
    hasher, size = hashlib.sha256(), 0
    for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise too_large
        hasher.update(chunk)
        target.write(chunk)
    return "sha256:" + hasher.hexdigest()


def _parse(ref: str) -> ImageReference:
    try:
        return parse_reference(ref)
    except docker.errors.InvalidRepository as exc:
        raise ImageError(f"image reference {ref!r} is not valid: {exc}", hint="fix `image` in devcontainer.json") \
            from None


def _image_manifest(session: _RegistrySession, ref: str) -> tuple[dict[str, Any], str]:
    """The image manifest of `ref` for this host's platform (through the index of a multi-platform image), and its
    digest (so the backend can pull exactly the image whose config was read)."""
    manifest, digest = session.get_manifest(session.ref.reference, _MANIFEST_TYPES)
    if manifest.get("mediaType") in _INDEX_TYPES or "manifests" in manifest:
        digest = _platform_manifest(manifest, ref)
        manifest, _ = session.get_manifest(digest, _MANIFEST_TYPES[2:])
    return manifest, digest


def _platform_manifest(index: dict[str, Any], ref: str) -> str:
    arch = _ARCH.get(platform.machine(), platform.machine())
    entries = index.get("manifests")
    for entry in entries if isinstance(entries, list) else []:
        plat = entry.get("platform") if isinstance(entry, dict) else None
        if isinstance(plat, dict) and plat.get("os") == "linux" and plat.get("architecture") == arch \
                and isinstance(entry.get("digest"), str):
            return str(entry["digest"])
    raise ImageError(f"image {ref} has no linux/{arch} variant",
                     hint="use an image published for this machine's architecture")


class _RegistrySession:
    """One image's requests: answers the registry's 401 challenge once (Basic, or a Bearer token from its realm)."""

    def __init__(self, ref: ImageReference, timeout: float, *, subject: str = "",
                 name_hint: str = "the image name and tag") -> None:
        self.ref, self.timeout = ref, timeout
        self.subject, self.name_hint = subject, name_hint  # how messages name what is read, and what to check
        self.http = requests.Session()
        self.http.trust_env = False  # no proxies from the environment: credentials go to the registry alone
        self.authorization: str | None = None
        self.opened: list[requests.Response] = []  # streamed blobs, closed with the session

    def __enter__(self) -> _RegistrySession:
        return self

    def __exit__(self, *exc: object) -> None:
        for response in self.opened:
            response.close()
        self.http.close()

    def get_json(self, path: str, *, accept: tuple[str, ...], what: str) -> dict[str, Any]:
        return self._json(self._authorized_get(path, accept, what), what)

    def _json(self, response: requests.Response, what: str) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            raise ImageError(f"registry {self.ref.registry} sent a {what} of {self._image} that is not JSON",
                             hint="check that the reference names a container image") from None
        if not isinstance(body, dict):
            raise ImageError(f"registry {self.ref.registry} sent an unexpected {what} for {self._image}")
        return body

    def get_manifest(self, reference: str, accept: tuple[str, ...]) -> tuple[dict[str, Any], str]:
        """A manifest and its digest: the registry's Docker-Content-Digest, else the sha256 of the bytes sent."""
        response = self._authorized_get(f"manifests/{reference}", accept, "manifest")
        body = self._json(response, "manifest")
        digest = response.headers.get("Docker-Content-Digest", "")
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
            digest = "sha256:" + hashlib.sha256(response.content).hexdigest()
        return body, digest

    def open_blob(self, digest: str, media_type: str) -> IO[bytes]:
        """A layer blob as a stream of its stored bytes (each read bounded by the request timeout)."""
        if "zstd" in media_type:  # Python's tarfile reads tar and gzip only
            raise ImageError(f"{self._image} has a zstd-compressed layer; devsy cannot read its accounts",
                             hint="set remoteUser to UID:GID in devcontainer.json, or publish the image with gzip "
                             "layers")
        response = self._authorized_get(f"blobs/{digest}", ("*/*",), "layer", stream=True)
        self.opened.append(response)
        response.raw.decode_content = False  # the layer's own gzip is the tar reader's, not HTTP's
        return response.raw

    def _authorized_get(self, path: str, accept: tuple[str, ...], what: str, *,
                        stream: bool = False) -> requests.Response:
        url = f"{self.ref.api_base}/{path}"
        response = self._get(url, accept, stream=stream)
        if response.status_code == 401 and self.authorization is None:
            response.close()
            self.authorization = self._answer_challenge(response.headers.get("WWW-Authenticate", ""))
            response = self._get(url, accept, stream=stream)
        try:
            self._raise_for(response, what)
        except ImageError:
            response.close()
            raise
        return response

    @property
    def _image(self) -> str:
        """What the messages name: "image REF", or the subject a caller gave (e.g. a Feature by its id)."""
        return self.subject or f"image {self.ref.registry}/{self.ref.repository}:{self.ref.reference}"

    def _get(self, url: str, accept: tuple[str, ...], *, stream: bool = False) -> requests.Response:
        headers = {"Accept": ", ".join(accept)}
        if self.authorization:
            headers["Authorization"] = self.authorization
        try:
            return self.http.get(url, headers=headers, timeout=self.timeout, stream=stream)
        except requests.RequestException as exc:
            raise ImageError(
                f"registry {self.ref.registry} of {self._image} could not be reached: "
                f"{type(exc).__name__}: {redact_url(str(exc))}",
                hint=f"check {self.name_hint} and that the registry is reachable from this host",
            ) from None

    def _answer_challenge(self, challenge: str) -> str | None:
        scheme, _, params = challenge.partition(" ")
        username, password = self._credentials()
        if scheme.lower() == "basic":
            if username is None:
                return None
            return requests.auth._basic_auth_str(username, password or "")  # noqa: SLF001 - requests' own encoder
        if scheme.lower() != "bearer":
            return None
        fields = dict(re.findall(r'(\w+)="([^"]*)"', params))
        realm = fields.pop("realm", "")
        if not realm:
            return None
        fields.setdefault("scope", f"repository:{self.ref.repository}:pull")
        if realm.startswith("http://") and not self.ref.insecure:
            username = password = None  # never send credentials in clear text to a remote token service
        auth = (username, password or "") if username is not None else None
        try:
            if username is None and password:  # an identity token (`docker login` of ACR, GCR): OAuth2 refresh
                response = self.http.post(realm, data={**fields, "grant_type": "refresh_token", "client_id": "devsy",
                                                       "refresh_token": password}, timeout=self.timeout)
            else:
                response = self.http.get(realm, params=fields, auth=auth, timeout=self.timeout)
        except requests.RequestException as exc:
            raise ImageError(f"the token service of registry {self.ref.registry} could not be reached: "
                             f"{type(exc).__name__}", hint="check that the registry is reachable") from None
        if response.status_code != 200:
            return None  # the retried request then reports the registry's refusal
        try:
            body = response.json()
        except ValueError:
            return None
        token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
        return f"Bearer {token}" if isinstance(token, str) and token else None

    def _credentials(self) -> tuple[str | None, str | None]:
        """(username, password) from Docker's config; (None, identity token) for a token login. A credential
        helper (credsStore, credHelpers) runs as docker-py runs it, without a time limit of devsy's."""
        try:
            config = docker.auth.load_config()
            entry = docker.auth.resolve_authconfig(config, self.ref.registry) or {}
        except docker.errors.DockerException as exc:
            raise ImageError(
                f"reading Docker's credentials for registry {self.ref.registry} failed: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:200] if str(exc) else 'no message'}",
                hint="fix credsStore/credHelpers in Docker's config.json (DOCKER_CONFIG, else ~/.docker) or log in "
                f"again with `docker login {self.ref.registry}`",
            ) from None
        username = entry.get("username") or entry.get("Username")
        password = entry.get("password") or entry.get("Password") or entry.get("IdentityToken")
        return username, password

    def _raise_for(self, response: requests.Response, what: str) -> None:
        status = response.status_code
        if status == 200:
            return
        if status in (401, 403):
            raise ImageError(
                f"registry {self.ref.registry} refused to give the {what} of {self._image} "
                f"(HTTP {status}: {'no credentials or wrong ones' if status == 401 else 'not allowed'})",
                hint=f"log in with `docker login {self.ref.registry}` (devsy and msb use Docker's credentials); "
                "devsy never prints them",
            )
        if status == 404:
            raise ImageError(f"{self._image} was not found in registry {self.ref.registry} ({what}: HTTP 404)",
                             hint=f"check {self.name_hint} in devcontainer.json")
        raise ImageError(f"registry {self.ref.registry} answered HTTP {status} for the {what} of {self._image}",
                         hint="retry; if it persists, check the registry")
