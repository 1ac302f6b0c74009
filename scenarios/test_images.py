"""images: what an image carries reaches the guest, and the images devsy builds (Go: provider_microsandbox_images.go).

The Go suite runs on MicroSandbox only and checks a marker file and an ENV value of a Docker-only image and of a
Dockerfile build; here both run on every provider (Docker is the reference the microVM must match) and go on to
what the spec decides from an image (USER, WORKDIR, containerEnv over ENV) and to the build's life cycle (args,
target, reuse, --recreate, delete). Built and local images live in the host's Docker engine, the one devsy prepares
them with for every backend; MicroSandbox boots them loaded by digest (devsy/driver/microsandbox/images.py).
registry-pull serves the image from an owned loopback registry that asks for credentials: the Docker engine pulls
it for Docker; msb pulls it itself for MicroSandbox, and the host's engine never holds it.
local-feature and oci-feature add Dev Container Features: a local one on a Dockerfile build (Go's fixture shape) and
one the case pushes to an owned loopback registry; devsy installs them on the host's engine for every backend.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import uuid
from pathlib import Path
from typing import Callable

import docker
import docker.errors

from fixtures.oci_registry import OciRegistry
from harness import case
from harness.backends import LABEL_WORKSPACE, BackendInspector, BackendInstance
from harness.backends.microsandbox import MicrosandboxInspector
from harness.case_context import CaseContext
from harness.commands import run_bounded, tail
from harness.devsy_handle import DevsyHandle
from harness.outcome import Outcome, parse_outcome
from harness.providers import Provider
from scenarios.support import GUEST_IMAGE, assert_running, live_up_args, local_source, only_instance, write_config

DOCKER_API_TIMEOUT = 120
REMOVE_PASSES = 8
MARKER = "/usr/local/share/devsy-image-parity"
MARKER_MODE, MARKER_OWNER = "604", "1000:1001"  # dev:alt, a mode no default umask gives: the image's, not a copy's
IMAGE_WORKDIR = "/srv/devsy-parity"
IMAGE_PATH = "/opt/devsy-parity/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOOL = "/opt/devsy-parity/bin/devsy-parity-tool"
# What the guest prints of the image's ENV, one per line (`-` when unset), then PATH and where the tool resolves.
ENV_SCRIPT = ('for v in DEVSY_IMAGE_PARITY DEVSY_IMAGE_OVERRIDE DEVSY_CONFIG_ONLY; do printenv "$v" || echo -; done; '
              'printf "%s\\n" "$PATH"; command -v devsy-parity-tool')


def _token() -> str:
    """A value shaped like a GitHub token: what a user passes as a build arg or containerEnv and must never see."""
    return f"ghp_{uuid.uuid4().hex}{uuid.uuid4().hex[:4]}"


def _docker() -> docker.DockerClient:
    return docker.from_env(timeout=DOCKER_API_TIMEOUT)


def _up(devsy: DevsyHandle, source: Path, wid: str, *, recreate: bool = False) -> tuple[Outcome, bytes]:
    """`devsy up --json` (cleanup registered first) and everything it printed, for the secrets check: the outcome's
    record keeps only output tails, and a build prints far more."""
    completed = devsy.run(*live_up_args(devsy, source, wid, recreate=recreate))
    outcome = parse_outcome(completed.stdout, completed.exit_code, devsy.log.records[-1])
    return outcome, completed.stdout + completed.stderr


def _instance_id(outcome: Outcome) -> str:
    instance = outcome.ws().instance
    assert instance is not None, f"devsy up reported no instance: {outcome.ws()}"
    return instance.id


def _assert_not_printed(secret: str, printed: bytes, what: str) -> None:
    """The secret is nowhere in what devsy printed; a failure shows the lines that held it, masked here (the
    report must not carry it either)."""
    leaked = [line.replace(secret.encode(), b"<SECRET>") for line in printed.splitlines() if secret.encode() in line]
    assert not leaked, f"devsy printed a secret during {what}: {leaked[:5]!r}"


def _guest(devsy: DevsyHandle, wid: str, script: str) -> tuple[str, str]:
    """The script's stdout through `devsy exec` and through `devsy ssh` (both the developer's sessions)."""
    through_exec = devsy.sh(wid, script)
    through_ssh = devsy.run("ssh", wid, "--command", script)
    assert through_ssh.exit_code == 0, f"devsy ssh exited {through_ssh.exit_code}: {through_ssh.stderr[-2000:]!r}"
    return through_exec, through_ssh.stdout.decode("utf-8", "replace")


# -- image-only ------------------------------------------------------------------------------------------------------
def _parity_image(case: CaseContext, wid: str) -> str:
    """Build (with the Docker engine) a guest-based image with a marker file, ENV values, PATH, USER and WORKDIR."""
    tag = f"devsy-harness-image-{wid}:parity"
    dockerfile = "\n".join([
        f"FROM {GUEST_IMAGE}",
        f"RUN mkdir -p /usr/local/share {IMAGE_WORKDIR} /opt/devsy-parity/bin"
        f" && printf 'image-parity\\n' > {MARKER} && chown {MARKER_OWNER} {MARKER} && chmod {MARKER_MODE} {MARKER}"
        f" && printf '#!/bin/sh\\necho parity-tool\\n' > {TOOL} && chmod 755 {TOOL}",
        "ENV DEVSY_IMAGE_PARITY=image-parity DEVSY_IMAGE_OVERRIDE=from-image",
        f"ENV PATH={IMAGE_PATH}",
        f"WORKDIR {IMAGE_WORKDIR}",
        "USER dev",
        # Content of this case alone: without it the other column's build is the same image (same id), and
        # removing one tag leaves the content in the engine under the other.
        f"LABEL dev.devsy.harness-case={wid}",
        "",
    ])
    # Registered before it exists (a build cut by the deadline may still tag it); "not found" is done.
    case.cleanup.add(f"remove the case's image {tag}", lambda: _remove_tag(tag))
    # Host networking: this engine has no bridge for the build's RUN container.
    _docker().images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True,
                           network_mode="host")
    return tag


def _remove_tag(tag: str) -> None:
    try:
        _docker().images.remove(tag, force=True)
    except docker.errors.ImageNotFound:
        pass


@case("images/image-only")
def test_image_only(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    wid = case.workspace_id()
    image = _parity_image(case, wid)
    source = local_source(case)
    write_config(source, {"image": image})  # only the image: every other decision is the image's or the spec's
    ws_outcome = devsy.up(source, wid)
    ws = ws_outcome.ws()
    assert_running(ws)

    # remoteUser and containerUser unset: the developer is the image's USER.
    assert ws.remote_user == "dev", f"remoteUser unset should follow the image's USER dev, devsy chose {ws.remote_user}"
    assert _guest(devsy, wid, "id -un") == ("dev\n", "dev\n")
    marker = f"cat {MARKER}; stat -c '%a %u:%g' {MARKER}"
    expected_marker = f"image-parity\n{MARKER_MODE} {MARKER_OWNER}\n"
    assert _guest(devsy, wid, marker) == (expected_marker,) * 2, "the image's marker file differs in the guest"
    image_env = f"image-parity\nfrom-image\n-\n{IMAGE_PATH}\n{TOOL}\n"
    assert _guest(devsy, wid, ENV_SCRIPT) == (image_env,) * 2, "the image's ENV (or PATH) does not reach the guest"
    # Sessions start in the workspace folder (the spec's); the image's own process keeps its WORKDIR and USER.
    assert _guest(devsy, wid, "pwd") == (f"{ws.workspace_folder}\n",) * 2
    # As the developer, who is PID 1's user: root in a container lacks CAP_SYS_PTRACE to read another uid's cwd.
    pid1 = devsy.sh(wid, "stat -c %u /proc/1 && readlink /proc/1/cwd")
    assert pid1 == f"1000\n{IMAGE_WORKDIR}\n", f"PID 1 should run in the image's WORKDIR as its USER: {pid1!r}"

    # containerEnv overrides one image value and adds one; the others stay the image's.
    token = _token()
    write_config(source, {"image": image,
                          "containerEnv": {"DEVSY_IMAGE_OVERRIDE": "from-config", "DEVSY_CONFIG_ONLY": token}})
    recreated, printed = _up(devsy, source, wid, recreate=True)
    assert _instance_id(recreated) != _instance_id(ws_outcome), "--recreate kept the instance (nothing proven)"
    config_env = f"image-parity\nfrom-config\n{token}\n{IMAGE_PATH}\n{TOOL}\n"
    assert _guest(devsy, wid, ENV_SCRIPT) == (config_env,) * 2, "containerEnv did not override/extend the image ENV"
    _assert_not_printed(token, printed, "up --recreate")
    status = devsy.run("status", wid, "--json")
    _assert_not_printed(token, status.stdout + status.stderr, "status")

    image_id = _docker().images.get(image).id
    devsy.delete(wid).expect_success()
    assert backend.instances(wid) == [], f"delete left the instance: {backend.instances(wid)}"
    # devsy did not build it: the user's image is theirs to keep.
    assert _docker().images.get(image).id == image_id, f"devsy delete removed or changed the user's image {image}"


# -- dockerfile-build ------------------------------------------------------------------------------------------------
# Three stages: `parity` is the target; `unused`, the last (what a build without target yields), must not be built.
DOCKERFILE = f"""FROM {GUEST_IMAGE} AS base
ARG PARITY_FLAVOR=default-flavor
ARG PARITY_VALUE
ARG PARITY_TOKEN
RUN mkdir -p /usr/local/share \\
 && printf '%s\\n' "$PARITY_VALUE" > {MARKER} \\
 && printf '%s\\n' "$PARITY_FLAVOR" > /usr/local/share/devsy-image-flavor \\
 && printf '%s' "$PARITY_TOKEN" | sha256sum | cut -d' ' -f1 > /usr/local/share/devsy-image-token \\
 && echo "the build saw the token $PARITY_TOKEN"
ENV DEVSY_IMAGE_PARITY=$PARITY_VALUE

FROM base AS parity
RUN printf 'parity-stage\\n' > /usr/local/share/devsy-image-stage

FROM base AS unused
RUN printf 'unused-stage\\n' > /usr/local/share/devsy-image-stage
"""
BUILD_VIEW = ("cat /usr/local/share/devsy-image-parity /usr/local/share/devsy-image-flavor "
              "/usr/local/share/devsy-image-stage /usr/local/share/devsy-image-token; "
              "printf '%s\\n' \"$DEVSY_IMAGE_PARITY\"")


def _build_config(source: Path, value: str, token: str) -> None:
    write_config(source, {"build": {"dockerfile": "Dockerfile", "target": "parity",
                                    "args": {"PARITY_FLAVOR": "overridden-flavor", "PARITY_VALUE": value,
                                             "PARITY_TOKEN": token}},
                          "remoteUser": "dev"})


def _built_images(wid: str, *, all_layers: bool = False) -> dict[str, str]:
    """Image id -> tags of the images devsy built for `wid` (found by its label; `all_layers`: untagged ones too)."""
    images = _docker().images.list(all=all_layers, filters={"label": f"{LABEL_WORKSPACE}={wid}"})
    return {image.id: ",".join(image.tags) for image in images}


def _docker_instance_image(backend: BackendInspector, instance: BackendInstance) -> str:
    return str(_docker().containers.get(instance.id).attrs["Image"])


def _msb_instance_image(backend: BackendInspector, instance: BackendInstance) -> str:
    """The Docker image id msb boots the sandbox from: its image must be `devsy-image:sha256-<id>`, a reference msb
    holds with that config digest (loaded by digest, so a moved tag cannot change it)."""
    assert isinstance(backend, MicrosandboxInspector)
    sandbox = json.loads(_msb(backend, "inspect", instance.name))
    # msb's config holds the image as {"Oci": {"reference": REF, "root_disk": ...}} (tests/test_msb_spec.py).
    image = (sandbox.get("active_config") or sandbox.get("config") or {}).get("image") or {}
    ref = str((image.get("Oci") or {}).get("reference", "")) if isinstance(image, dict) else str(image)
    repository, _, digest = ref.partition(":sha256-")
    assert repository == "devsy-image" and len(digest) == 64, f"msb boots {ref!r}, not an image loaded by digest"
    loaded = json.loads(_msb(backend, "image", "inspect", ref))["config"]["digest"]
    assert loaded == f"sha256:{digest}", f"msb's {ref} has config digest {loaded}, not the digest it is tagged by"
    return str(loaded)


def _msb(backend: MicrosandboxInspector, *args: str) -> bytes:
    completed = backend.run_msb(*args, "--format", "json", timeout=60)  # the column's msb (a -sim: its stand-in)
    assert completed.exit_code == 0, f"`msb {' '.join(args)}` exited {completed.exit_code}: {tail(completed.stderr)}"
    return completed.stdout


# backend -> the Docker image id the instance runs, read from the backend itself.
INSTANCE_IMAGE: dict[str, Callable[[BackendInspector, BackendInstance], str]] = {
    "docker": _docker_instance_image,
    "microsandbox": _msb_instance_image,
}


@case("images/dockerfile-build")
def test_dockerfile_build(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    wid = case.workspace_id()
    token = _token()
    source = local_source(case)
    (source / ".devcontainer" / "Dockerfile").write_text(DOCKERFILE)
    _build_config(source, "value-one", token)
    # Registered first, so it runs after devsy delete: whatever a failed case leaves of devsy's builds goes.
    case.cleanup.add(f"remove the images devsy built for {wid}", lambda: _remove_built(wid))

    first, printed = _up(devsy, source, wid)
    assert_running(first.ws())
    _assert_not_printed(token, printed, "the first up (its build prints the token)")
    token_digest = hashlib.sha256(token.encode()).hexdigest()
    assert _guest(devsy, wid, BUILD_VIEW) == (
        f"value-one\noverridden-flavor\nparity-stage\n{token_digest}\nvalue-one\n",) * 2, \
        "the build args or the target did not shape the image the guest runs"
    built = _built_images(wid)
    assert len(built) == 1 and next(iter(built.values())).startswith(f"devsy-build-{wid}:"), \
        f"expected one image devsy built for {wid}, Docker has {built}"
    image_id = INSTANCE_IMAGE[provider.backend](backend, only_instance(backend, wid))
    assert image_id in built, f"the instance runs {image_id}, not the image devsy built ({built})"

    again, printed = _up(devsy, source, wid)
    assert again.ws().reused and _instance_id(again) == _instance_id(first), f"a second up did not reuse: {again}"
    assert INSTANCE_IMAGE[provider.backend](backend, only_instance(backend, wid)) == image_id
    assert _built_images(wid) == built, "a second up rebuilt the image"
    _assert_not_printed(token, printed, "the second up")

    _build_config(source, "value-two", token)
    rebuilt, printed = _up(devsy, source, wid, recreate=True)
    assert _instance_id(rebuilt) != _instance_id(first), "--recreate kept the instance"
    _assert_not_printed(token, printed, "up --recreate (its build prints the token)")
    new_image = INSTANCE_IMAGE[provider.backend](backend, only_instance(backend, wid))
    assert new_image != image_id and new_image in _built_images(wid), \
        f"a changed build arg with --recreate did not rebuild: the instance runs {new_image}"
    assert _guest(devsy, wid, BUILD_VIEW) == (
        f"value-two\noverridden-flavor\nparity-stage\n{token_digest}\nvalue-two\n",) * 2

    deleted = devsy.run("delete", wid, "--json")
    assert parse_outcome(deleted.stdout, deleted.exit_code, devsy.log.records[-1]).ok, tail(deleted.stderr)
    _assert_not_printed(token, deleted.stdout + deleted.stderr, "delete")
    assert backend.instances(wid) == [], f"delete left the instance: {backend.instances(wid)}"
    left = _built_images(wid, all_layers=True)
    assert left == {}, f"delete left images devsy built for {wid}: {left}"


def _remove_built(wid: str) -> None:
    """Remove every image labelled for `wid`, tagged ones first (their untagged parents go with them); a layer
    that still has children is retried on the next pass, a gone one is done."""
    for _ in range(REMOVE_PASSES):
        left = _built_images(wid, all_layers=True)
        if not left:
            return
        for image_id, tags in sorted(left.items(), key=lambda item: not item[1]):
            try:
                _docker().images.remove(image_id, force=True)
            except docker.errors.ImageNotFound:
                pass
            except docker.errors.APIError:
                continue  # a parent of a layer not yet removed
    left = _built_images(wid, all_layers=True)
    assert not left, f"images built for {wid} could not be removed: {left}"


# -- registry-pull ---------------------------------------------------------------------------------------------------
REGISTRY_USER = "parity"
MSB_REGISTRY_AGENT = "oci-client/"  # msb's registry client, as the registry's access log names it
DOCKER_REGISTRY_AGENT = "docker/"


def _docker_config(folder: Path, registry: OciRegistry, password: str | None) -> dict[str, str]:
    """devsy's environment with a DOCKER_CONFIG that holds `docker login` credentials (none: an empty config)."""
    folder.mkdir(parents=True, exist_ok=True)
    token = base64.b64encode(f"{REGISTRY_USER}:{password}".encode()).decode()
    auths = {registry.host: {"auth": token}} if password else {}
    (folder / "config.json").write_text(json.dumps({"auths": auths}))
    (folder / "config.json").chmod(0o600)
    return {"DOCKER_CONFIG": str(folder)}


def _in_docker(ref: str) -> bool:
    try:
        _docker().images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


def _up_with_env(devsy: DevsyHandle, source: Path, wid: str, env: dict[str, str]) -> tuple[Outcome, bytes]:
    completed = devsy.run(*live_up_args(devsy, source, wid), env=env)
    return parse_outcome(completed.stdout, completed.exit_code, devsy.log.records[-1]), completed.stdout + \
        completed.stderr


@case("images/registry-pull")
def test_registry_pull(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    wid = case.workspace_id()
    password = _token()
    registry = OciRegistry(auth=(REGISTRY_USER, password))
    case.cleanup.add("stop the case's OCI registry", registry.stop)
    registry.start()
    local = _parity_image(case, wid)
    local_id = _docker().images.get(local).id
    ref = registry.push(local, f"parity/{wid}:1")
    repo = f"parity/{wid}"
    case.cleanup.add(f"remove the pulled image {ref}", lambda: _remove_tag(ref))
    _remove_tag(local)  # the engine now holds neither the name nor the content: a pull must fetch it
    assert not _in_docker(ref) and not _in_docker(local_id), "the image is still in the host's Docker engine"
    source = local_source(case)
    write_config(source, {"image": ref})

    # The registry asks for credentials: without any, up is refused as an image error, and nothing is created.
    refused, printed = _up_with_env(devsy, source, wid, _docker_config(case.workdir / "no-login", registry, None))
    error = refused.expect_error("image")
    assert registry.host in error.message, f"the refusal does not name the registry: {error.message!r}"
    assert backend.instances(wid) == [], f"a refused pull left an instance: {backend.instances(wid)}"
    assert wid not in devsy.workspaces().listed, "a refused pull left a workspace record"

    # With `docker login` credentials (Docker's config, which devsy and msb both read) the image is pulled.
    registry.mark()
    login = _docker_config(case.workdir / "login", registry, password)
    pulled, printed_ok = _up_with_env(devsy, source, wid, login)
    assert_running(pulled.ws())
    assert pulled.ws().remote_user == "dev", "remoteUser unset should follow the pulled image's USER dev"
    assert _guest(devsy, wid, f"cat {MARKER}; printenv DEVSY_IMAGE_PARITY") == ("image-parity\nimage-parity\n",) * 2
    reads = [r for r in registry.requests() if r.path.startswith(f"/v2/{repo}/manifests/") and r.status == 200
             and r.method in ("GET", "HEAD")]
    assert reads, f"no manifest of {repo} was read from the registry: {registry.requests()}"
    case.record_figure("manifest_reads", len(reads))
    pullers = {r.user_agent.split(" ")[0] for r in reads}
    if provider.backend == "microsandbox":
        # msb pulls it itself; the host's engine never holds it, before or after (the host read only the config).
        assert any(r.user_agent.startswith(MSB_REGISTRY_AGENT) for r in reads), f"msb did not pull: {pullers}"
        assert not any(DOCKER_REGISTRY_AGENT in r.user_agent for r in reads), f"Docker pulled it: {pullers}"
        assert not _in_docker(ref) and not _in_docker(local_id), "the image reached the host's Docker engine"
    else:
        assert any(DOCKER_REGISTRY_AGENT in r.user_agent for r in reads), f"the engine did not pull: {pullers}"
    for text, what in ((printed, "the refused up"), (printed_ok, "the up that pulled")):
        _assert_not_printed(password, text, what)
        _assert_not_printed(base64.b64encode(f"{REGISTRY_USER}:{password}".encode()).decode(), text, what)
    devsy.delete(wid).expect_success()
    assert backend.instances(wid) == [], f"delete left the instance: {backend.instances(wid)}"


# -- local-feature ---------------------------------------------------------------------------------------------------
# The Go catalogue's fixture (e2e/tests/up/testdata/microsandbox-images): a Dockerfile build plus
# "features": {"./features/parity": {}}, generated here with an option whose default the empty options take.
FEATURE_MARKER = "/usr/local/share/devsy-feature-parity"
FEATURE_DOCKERFILE = (f"FROM {GUEST_IMAGE}\nRUN mkdir -p /usr/local/share && printf '%s\\n' dockerfile-parity"
                      f" > {MARKER}\nENV DEVSY_IMAGE_PARITY=dockerfile-parity\n")
FEATURE_VIEW = (f"cat {MARKER} {FEATURE_MARKER}; "
                'printf "%s\\n" "$DEVSY_IMAGE_PARITY" "$DEVSY_FEATURE_PARITY"; id -un')


def _parity_feature(env_value: str, install_line: str, **options: dict) -> dict[str, str]:
    """A Feature's files (devcontainer-feature.json, install.sh): its containerEnv DEVSY_FEATURE_PARITY, its marker
    file written by `install_line`'s output, its options."""
    metadata = {"id": "parity", "version": "1.0.0", "name": "image parity marker",
                "containerEnv": {"DEVSY_FEATURE_PARITY": env_value}, **({"options": options} if options else {})}
    return {"devcontainer-feature.json": json.dumps(metadata),
            "install.sh": f"#!/bin/sh\nset -eu\nmkdir -p /usr/local/share\n{install_line} > {FEATURE_MARKER}\n"}


def _feature_images(wid: str) -> dict[str, str]:
    """The images devsy built for `wid` that carry its Feature layers (tagged devsy-features-<wid>:...)."""
    return {image_id: tags for image_id, tags in _built_images(wid).items()
            if any(tag.startswith(f"devsy-features-{wid}:") for tag in tags.split(","))}


def _assert_runs_feature_image(provider: Provider, backend: BackendInspector, wid: str) -> str:
    """The instance runs the image with the Feature layers (MicroSandbox: loaded by digest), not the base."""
    image_id = INSTANCE_IMAGE[provider.backend](backend, only_instance(backend, wid))
    features = _feature_images(wid)
    assert image_id in features, f"the instance runs {image_id}, not the Feature image devsy built ({features}; " \
                                 f"all it built: {_built_images(wid)})"
    return image_id


@case("images/local-feature")
def test_local_feature(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    wid = case.workspace_id()
    source = local_source(case)
    devcontainer = source / ".devcontainer"
    (devcontainer / "Dockerfile").write_text(FEATURE_DOCKERFILE)
    feature = devcontainer / "features" / "parity"
    feature.mkdir(parents=True)
    for name, text in _parity_feature("feature-parity", 'printf "%s|%s\\n" feature-parity "$FLAVOR"',
                                      flavor={"type": "string", "default": "default-flavor"}).items():
        (feature / name).write_text(text)
    (feature / "install.sh").chmod(0o755)
    write_config(source, {"build": {"dockerfile": "Dockerfile"}, "containerUser": "root", "remoteUser": "root",
                          "features": {"./features/parity": {}}})
    case.cleanup.add(f"remove the images devsy built for {wid}", lambda: _remove_built(wid))

    first = devsy.up(source, wid)
    assert_running(first.ws())
    expected = "dockerfile-parity\nfeature-parity|default-flavor\ndockerfile-parity\nfeature-parity\nroot\n"
    assert _guest(devsy, wid, FEATURE_VIEW) == (expected,) * 2, \
        "the image's or the Feature's marker file or ENV value (or the option's default) differs in the guest"
    image_id = _assert_runs_feature_image(provider, backend, wid)
    built = _built_images(wid)

    again = devsy.up(source, wid)
    assert again.ws().reused and _instance_id(again) == _instance_id(first), f"a second up did not reuse: {again}"
    assert _assert_runs_feature_image(provider, backend, wid) == image_id
    assert _built_images(wid) == built, "a second up built again"

    devsy.delete(wid).expect_success()
    assert backend.instances(wid) == [], f"delete left the instance: {backend.instances(wid)}"
    left = _built_images(wid, all_layers=True)
    assert left == {}, f"delete left images devsy built for {wid} (the build's or the Feature layers): {left}"


# -- oci-feature -----------------------------------------------------------------------------------------------------
def _forget_cached_feature(digest: str) -> None:
    """Remove the folder devsy extracted the case's Feature to (its host cache, by digest): content unique to the
    case, which no later run can use."""
    from devsy.agent.wheels import cache_root  # where the devsy under test caches on this host

    shutil.rmtree(cache_root() / "features" / "oci" / digest.replace(":", "-"), ignore_errors=True)


@case("images/oci-feature")
def test_oci_feature(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    wid = case.workspace_id()
    registry = OciRegistry()
    case.cleanup.add("stop the case's OCI registry", registry.stop)
    registry.start()
    repo = "features/parity"
    # The case's id in install.sh: content (so a digest) of this case alone, never one devsy cached before.
    files = _parity_feature("oci-parity", f'printf "%s|%s\\n" "$GREETING" {wid}',
                            greeting={"type": "string", "default": "hello"})
    digest = registry.push_feature(f"{repo}:1", files)
    case.cleanup.add(f"forget the cached Feature {digest}", lambda: _forget_cached_feature(digest))
    feature = registry.ref(f"{repo}:1")
    source = local_source(case, features={feature: {"greeting": "from-config"}})
    case.cleanup.add(f"remove the images devsy built for {wid}", lambda: _remove_built(wid))

    registry.mark()
    first = devsy.up(source, wid)
    assert_running(first.ws())
    view = f"cat {FEATURE_MARKER}; printenv DEVSY_FEATURE_PARITY; id -un"
    assert _guest(devsy, wid, view) == (f"from-config|{wid}\noci-parity\ndev\n",) * 2, \
        "the OCI Feature's option, marker file or ENV value differs in the guest"
    _assert_runs_feature_image(provider, backend, wid)
    requests_made = registry.requests()
    manifests = registry.manifest_reads(repo)
    blobs = [r.path for r in requests_made if r.path.startswith(f"/v2/{repo}/blobs/")]
    case.record_figure("manifest_reads", manifests)
    # The tag is resolved once and its one layer fetched once (devsy on the host: msb never sees the Feature).
    assert manifests == 1 and len(blobs) == 1, \
        f"the first up should read the manifest once and the layer once: {requests_made}"

    registry.mark()
    again = devsy.up(source, wid)
    assert again.ws().reused and _instance_id(again) == _instance_id(first), f"a second up did not reuse: {again}"
    assert registry.requests() == [], f"a second plain up asked the registry: {registry.requests()}"

    devsy.delete(wid).expect_success()
    assert backend.instances(wid) == [], f"delete left the instance: {backend.instances(wid)}"
    left = _built_images(wid, all_layers=True)
    assert left == {}, f"delete left the Feature layers devsy built for {wid}: {left}"
