"""Fetching the Features devcontainer.json names by OCI reference or tarball URL into a cache folder by digest.

OCI-published Features follow the spec's "Features distribution": the reference (`registry/namespace/feature[:tag]`
or `...@sha256:...`) names a manifest whose layer of media type `application/vnd.devcontainers.layer.v1+tar` is a tar
of the Feature's folder (devcontainer-feature.json, install.sh, ...). Manifest and blob are read through
devsy/registry_image.py (bounded requests, Docker's credentials; its docstring says why not the `oras` library).
Tarball URLs (https; plain http only to this machine) are downloaded with requests and pinned by the file's sha256.

The cache holds one extracted folder per digest (the manifest's for OCI, the file's for a tarball); content
addressed, so a cached folder is never stale. What asks the registry:
- a reference by digest, or a Feature `pinned` (devcontainer-lock.json) or `recorded` (known from an earlier up) to
  a digest whose folder is cached: nothing;
- a tag otherwise: one manifest read, as the reference CLI re-resolves tags on every build; the blob only when that
  digest is not cached yet.
A lockfile pin is read by its digest, as the reference does (containerCollectionsOCI.ts fetchOCIManifestIfExists):
the tag is not consulted, so a tag that moved since the lockfile was written still gives the pinned content.
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import requests
import urllib3.exceptions

from devsy.errors import ConfigError, ImageError
from devsy.redaction import redact_url
from devsy.loopback import is_loopback_host
from devsy.registry_image import ArtifactReader, copy_digested

if TYPE_CHECKING:
    from devsy.devcontainer.features.source import FeatureSource

FEATURE_CONFIG = "application/vnd.devcontainers"
FEATURE_LAYER = "application/vnd.devcontainers.layer.v1+tar"
FEATURE_FILE = "devcontainer-feature.json"
INSTALL_SCRIPT = "install.sh"
MAX_DOWNLOAD_BYTES = 64 << 20  # a Feature is scripts and a little data; a bigger answer is not one
MAX_EXTRACTED_BYTES = 256 << 20  # what its tar may unpack to (a compressed tarball could expand without bound)
TARBALL_TIMEOUT_S = (10.0, 30.0)  # connect, then each read
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class FetchedFeature:
    source: FeatureSource
    folder: Path  # an extracted folder holding devcontainer-feature.json and install.sh
    digest: str  # "sha256:..." of what was fetched (OCI: the manifest digest; tarball: the file's)


def fetch_feature(source: FeatureSource, cache_dir: Path, *, pinned: str | None = None,
                  recorded: str | None = None) -> FetchedFeature:
    """`source` (kind "oci" or "tarball") as an extracted folder under `cache_dir`.

    pinned: the digest devcontainer-lock.json gives it; a fetched digest that differs is a ConfigError.
    recorded: a digest this Feature resolved to before (an earlier up's); its cached folder is reused without
    asking the registry, and if it is not cached the reference is resolved anew (a moved tag is no error).
    Errors name the Feature id: ImageError for the registry or server, ConfigError for the reference or content."""
    for name, value in (("pinned", pinned), ("recorded", recorded)):
        if value is not None and not _DIGEST.fullmatch(value):
            raise ConfigError(f"Feature {_shown(source)}: the {name} digest {value!r} is not a sha256 digest",
                              hint="fix the entry in devcontainer-lock.json, or delete it to pin the Feature anew")
    if source.kind == "oci":
        return _fetch_oci(source, cache_dir / "oci", pinned, recorded)
    if source.kind == "tarball":
        return _fetch_tarball(source, cache_dir / "tarball", pinned, recorded)
    raise ConfigError(f"Feature {_shown(source)} is a {source.kind} Feature: only OCI and tarball Features are fetched",
                      hint="this is a devsy bug: a local Feature is read from its folder")


# -- OCI -------------------------------------------------------------------------------------------------------

def _fetch_oci(source: FeatureSource, cache: Path, pinned: str | None, recorded: str | None) -> FetchedFeature:
    if source.digest and pinned and source.digest != pinned:
        raise _mismatch(source, pinned, source.digest)
    wanted = source.digest or pinned  # a lockfile pin is read by digest, as the reference does: the tag is not asked
    if (hit := _cached_any(cache, wanted, recorded)) is not None:
        return FetchedFeature(source, *hit)
    name_hint = "the Feature id and its entry in devcontainer-lock.json" if pinned else "the Feature id"
    with ArtifactReader(_oci_reference(source, wanted), subject=f"Feature {_shown(source)}",
                        name_hint=name_hint) as reader:
        artifact = reader.manifest()  # by digest: checked against it
        folder = _cached(cache, artifact.digest)
        if folder is not None:
            return FetchedFeature(source, folder, artifact.digest)
        layer = _feature_layer(source, artifact.manifest)
        with _staging(cache) as staging:
            archive = staging / "layer.tar"
            with open(archive, "wb") as target:
                reader.save_blob(layer, target, max_bytes=MAX_DOWNLOAD_BYTES)
            folder = _install(source, archive, staging, cache, artifact.digest)
    return FetchedFeature(source, folder, artifact.digest)


def _oci_reference(source: FeatureSource, digest: str | None) -> str:
    """The registry reference to read: by `digest` (the id's or the lockfile's), else the id's tag (parse_feature_id
    makes it "latest" when the id names neither, as the spec says)."""
    name = f"{source.registry}/{source.repository}"
    return f"{name}@{digest}" if digest else f"{name}:{source.tag or 'latest'}"


def _feature_layer(source: FeatureSource, manifest: dict[str, Any]) -> str:
    """The digest of the Feature's tar: the manifest's layer of the devcontainers media type, under a config of
    media type application/vnd.devcontainers (what the reference CLI checks before it calls it a Feature)."""
    config, layers = manifest.get("config"), manifest.get("layers")
    config_type = config.get("mediaType") if isinstance(config, dict) else None
    if config_type == FEATURE_CONFIG:
        for layer in layers if isinstance(layers, list) else []:
            if isinstance(layer, dict) and layer.get("mediaType") == FEATURE_LAYER \
                    and isinstance(layer.get("digest"), str):
                return str(layer["digest"])
    what = f"no layer of media type {FEATURE_LAYER}" if config_type == FEATURE_CONFIG \
        else f"the config media type {config_type!r}, not {FEATURE_CONFIG!r}"
    raise ConfigError(f"Feature {_shown(source)} is not a Dev Container Feature: its manifest has {what}",
                      hint="check that the reference names a Feature (not an image); Features are published with "
                      "`devcontainer features publish`")


def _mismatch(source: FeatureSource, pinned: str, got: str) -> ConfigError:
    return ConfigError(f"Feature {_shown(source)} is {got}, but devcontainer-lock.json pins {pinned}",
                       hint="if the Feature's new content is wanted, delete its entry from devcontainer-lock.json "
                       "(devsy writes it anew); otherwise restore the content the lockfile pins")


# -- tarball ---------------------------------------------------------------------------------------------------

def _fetch_tarball(source: FeatureSource, cache: Path, pinned: str | None, recorded: str | None) -> FetchedFeature:
    url = source.url or source.id
    shown = _shown(source)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ConfigError(f"Feature {shown}: a tarball is fetched over https (plain http only from this machine)",
                          hint="use an https:// URL")
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigError(f"Feature {shown} is not an http(s) URL", hint="give a tarball Feature as an https:// URL")
    if (hit := _cached_any(cache, pinned, recorded)) is not None:
        return FetchedFeature(source, *hit)
    with _staging(cache) as staging:
        archive = staging / "feature.tgz"
        with open(archive, "wb") as target:
            digest = _download(url, shown, target)
        if pinned and digest != pinned:
            raise _mismatch(source, pinned, digest)
        folder = _cached(cache, digest) or _install(source, archive, staging, cache, digest)
    return FetchedFeature(source, folder, digest)


def _download(url: str, shown: str, target: IO[bytes]) -> str:
    """Stream `url` into `target` (bounded size, each wait bounded); returns the sha256 of the bytes."""
    with requests.Session() as http:
        # Only for this machine are the environment's proxies skipped: they would not reach it (and it needs none).
        http.trust_env = not is_loopback_host(urllib.parse.urlsplit(url).hostname)
        try:
            response = http.get(url, timeout=TARBALL_TIMEOUT_S, stream=True)
            with response:
                if response.status_code != 200:
                    raise ImageError(f"Feature {shown}: the server answered HTTP {response.status_code}",
                                     hint="check the URL" if response.status_code == 404
                                     else "check the URL and that it needs no login; retry")
                return copy_digested(response.raw.stream(1 << 16, decode_content=True), target,
                                     max_bytes=MAX_DOWNLOAD_BYTES, too_large=ImageError(
                                         f"Feature {shown}: the tarball is larger than {MAX_DOWNLOAD_BYTES} bytes",
                                         hint="check the URL: a Feature is a small tarball of scripts"))
        except (requests.RequestException, urllib3.exceptions.HTTPError) as exc:
            raise ImageError(f"Feature {shown} could not be downloaded: {type(exc).__name__}: "
                             f"{redact_url(str(exc))}", hint="check the URL and that its server is reachable") from None


# -- cache and extraction --------------------------------------------------------------------------------------

def _cached(cache: Path, digest: str) -> Path | None:
    folder = cache / digest.replace(":", "-")
    return folder if (folder / FEATURE_FILE).is_file() else None


def _cached_any(cache: Path, *digests: str | None) -> tuple[Path, str] | None:
    """The cached folder of the first of `digests` that has one, with that digest."""
    for digest in digests:
        if digest and (folder := _cached(cache, digest)) is not None:
            return folder, digest
    return None


class _staging:  # noqa: N801 - used as a context manager, like tempfile's
    """A private temporary folder inside the cache (same file system, so a finished folder is renamed in)."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache

    def __enter__(self) -> Path:
        self.cache.mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=".fetch-", dir=self.cache))
        return self.path

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _install(source: FeatureSource, archive: Path, staging: Path, cache: Path, digest: str) -> Path:
    """Extract `archive` safely, check it is a Feature, and move it to the cache as `digest`'s folder."""
    extracted = staging / "feature"
    extracted.mkdir()
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            if sum(member.size for member in members) > MAX_EXTRACTED_BYTES:
                raise ConfigError(f"Feature {_shown(source)}: its archive unpacks to more than "
                                  f"{MAX_EXTRACTED_BYTES} bytes", hint="check the reference: a Feature is small")
            # The "data" filter refuses absolute names, `..`, links leading outside and device files.
            tar.extractall(extracted, members=members, filter="data")
    except tarfile.FilterError as exc:
        raise ConfigError(f"Feature {_shown(source)}: its archive was refused: {exc}",
                          hint="the archive tries to write outside its folder; do not use this Feature") from None
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ConfigError(f"Feature {_shown(source)}: its archive could not be read: {type(exc).__name__}: {exc}",
                          hint="check that the reference names a Dev Container Feature tarball") from None
    for required in (FEATURE_FILE, INSTALL_SCRIPT):
        if not (extracted / required).is_file():
            raise ConfigError(f"Feature {_shown(source)}: its archive has no {required} at its top",
                              hint="a Feature's tar holds devcontainer-feature.json and install.sh at its root")
    target = cache / digest.replace(":", "-")
    if target.exists() and _cached(cache, digest) is None:
        shutil.rmtree(target, ignore_errors=True)  # a folder left incomplete by something else: replaced
    try:
        os.rename(extracted, target)
    except OSError as exc:
        if _cached(cache, digest) is None:  # not another fetch of the same digest that finished first
            raise ConfigError(f"Feature {_shown(source)} could not be stored in the cache {cache}: {exc.strerror}",
                              hint="check that devsy's home folder is writable") from None
    return target


def _shown(source: FeatureSource) -> str:
    """The Feature as devsy shows it: a tarball URL without its query or userinfo (a signed URL's token)."""
    return source.shown


__all__ = ["FEATURE_LAYER", "FetchedFeature", "fetch_feature"]
