"""Feature install order (installsAfter, dependsOn, overrideFeatureInstallOrder) and option checking, on real
Feature folders parsed by devsy (no engine needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from devsy.devcontainer.features.model import option_env_name, parse_user_features
from devsy.devcontainer.features.resolve import resolve_features
from devsy.errors import ConfigError


@pytest.fixture
def tmp_path(tmp_path: Path) -> Path:
    """The config's folder: a project's .devcontainer, where local Features must be (source.devcontainer_folder)."""
    folder = tmp_path / ".devcontainer"
    folder.mkdir()
    return folder


def _feature(config_dir: Path, name: str, **meta: object) -> str:
    folder = config_dir / name
    folder.mkdir(parents=True)
    (folder / "devcontainer-feature.json").write_text(json.dumps({"id": name, "version": "1.0.0", **meta}))
    (folder / "install.sh").write_text("#!/bin/sh\n")
    return f"./{name}"


def _order(config_dir: Path, features: dict, override: list[str] | None = None) -> list[str]:
    user = parse_user_features(features, config_dir, "devcontainer.json")
    return [f.source.id for f in resolve_features(user, override or [], config_dir)]


def test_installs_after_wins_over_config_order(tmp_path: Path) -> None:
    a = _feature(tmp_path, "a", installsAfter=["b"])
    b = _feature(tmp_path, "b")
    assert _order(tmp_path, {a: {}, b: {}}) == [b, a]
    assert _order(tmp_path, {b: {}, a: {}}) == [b, a]


def test_installs_after_by_relative_path_and_absent_target(tmp_path: Path) -> None:
    a = _feature(tmp_path, "a", installsAfter=["../c", "ghcr.io/not/present"])
    c = _feature(tmp_path, "c")
    assert _order(tmp_path, {a: {}, c: {}}) == [c, a]
    assert _order(tmp_path, {a: {}}) == [a]  # installsAfter is soft: an absent Feature is no dependency


def test_independent_features_sorted_by_id(tmp_path: Path) -> None:
    ids = [_feature(tmp_path, name) for name in ("zeta", "alpha", "mid")]
    assert _order(tmp_path, {i: {} for i in ids}) == ["./alpha", "./mid", "./zeta"]


def test_override_order_first_listed_first(tmp_path: Path) -> None:
    ids = [_feature(tmp_path, name) for name in ("a", "b", "c")]
    assert _order(tmp_path, {i: {} for i in ids}, ["./c", "./b"]) == ["./c", "./b", "./a"]


def test_override_cannot_break_depends_on(tmp_path: Path) -> None:
    a = _feature(tmp_path, "a", dependsOn={"../b": {}})
    b = _feature(tmp_path, "b")
    assert _order(tmp_path, {a: {}, b: {}}, ["./a"]) == [b, a]


def test_override_naming_an_absent_feature(tmp_path: Path) -> None:
    a = _feature(tmp_path, "a")
    with pytest.raises(ConfigError, match=r'"\./zz", which is not in "features"'):
        _order(tmp_path, {a: {}}, ["./zz"])


def test_depends_on_a_feature_not_in_the_config(tmp_path: Path) -> None:
    a = _feature(tmp_path, "a", dependsOn={"../x": {}})  # an OCI one is fetched: tests/test_features_depends_on.py
    with pytest.raises(ConfigError, match=r'"\./a" depends on "\.\./x", which is not in .* cannot be fetched'):
        _order(tmp_path, {a: {}})


def test_cycle_is_listed(tmp_path: Path) -> None:
    a = _feature(tmp_path, "a", installsAfter=["b"])
    b = _feature(tmp_path, "b", dependsOn={"../a": {}})
    c = _feature(tmp_path, "c")
    with pytest.raises(ConfigError, match=r"cycle: \./a -> \./b -> \./a"):
        _order(tmp_path, {a: {}, b: {}, c: {}})


def test_options_defaults_types_and_env_names(tmp_path: Path) -> None:
    a = _feature(tmp_path, "a", options={
        "version": {"type": "string", "default": "1", "proposals": ["1", "2"]},
        "with-docs": {"type": "boolean", "default": False},
        "flavour": {"type": "string", "enum": ["x", "y"], "default": "x"}})
    user = parse_user_features({a: "2"}, tmp_path, "devcontainer.json")  # a bare string is the "version" option
    [feature] = resolve_features(user, [], tmp_path)
    assert feature.option_env() == {"VERSION": "2", "WITH_DOCS": "false", "FLAVOUR": "x"}
    for given, message in (({"nope": "1"}, r' has no option "nope"'),
                           ({"with-docs": "yes"}, r': option "with-docs" must be a boolean, got string'),
                           ({"flavour": "z"}, r': option "flavour" must be one of x, y')):
        with pytest.raises(ConfigError, match=r'Feature "\./a"' + message):
            resolve_features(parse_user_features({a: given}, tmp_path, "devcontainer.json"), [], tmp_path)


@pytest.mark.parametrize(("name", "env"), [("version", "VERSION"), ("my-opt.x", "MY_OPT_X"), ("1st", "_ST"),
                                           ("__a", "_A")])
def test_option_env_name(name: str, env: str) -> None:
    assert option_env_name(name) == env


@pytest.mark.parametrize("bad", ["node", "owner/repo/feature@v1", "ghcr.io/Owner/x", "http://example.com/x.tgz",
                                 "./missing", "ghcr.io/a/b@sha256:short"])
def test_malformed_ids_name_the_id(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f'Feature "{bad}')):
        parse_user_features({bad: {}}, tmp_path, "devcontainer.json")


def test_contributions_merge_into_run_options(tmp_path: Path) -> None:
    from devsy.devcontainer.features.contributions import apply_feature_contributions, feature_lifecycle_commands
    from devsy.driver.base import Mount, MountType, RunOptions

    a = _feature(tmp_path, "a", capAdd=["SYS_PTRACE"], securityOpt=["seccomp=unconfined"], privileged=True,
                 mounts=["type=volume,source=a-cache,target=/cache", {"type": "volume", "source": "a-x",
                                                                       "target": "/x"}],
                 entrypoint="/usr/local/share/a-init.sh", postCreateCommand="echo a", onCreateCommand=["true"])
    b = _feature(tmp_path, "b", capAdd=["SYS_PTRACE", "NET_ADMIN"], init=True, installsAfter=["a"],
                 entrypoint="/usr/local/share/b-init.sh", postCreateCommand={"one": "echo b1", "two": "echo b2"})
    features = resolve_features(parse_user_features({b: {}, a: {}}, tmp_path, "devcontainer.json"), [], tmp_path)
    mine = Mount(MountType.VOLUME, "/cache", "mine")
    options = RunOptions(image="img", cap_add=["CHOWN"], mounts=[mine], entrypoint=["/bin/sh"], cmd=["-c", "k"])
    apply_feature_contributions(options, features)
    assert options.cap_add == ["SYS_PTRACE", "NET_ADMIN", "CHOWN"]
    assert options.security_opt == ["seccomp=unconfined"]
    assert (options.privileged, options.init) == (True, True)
    assert sorted((m.target, m.source) for m in options.mounts) == [("/cache", "mine"), ("/x", "a-x")]  # config wins
    assert options.entrypoint == ["/bin/sh", "-c", '/usr/local/share/a-init.sh\n/usr/local/share/b-init.sh\n'
                                  'exec "$@"', "-"]
    assert options.cmd == ["/bin/sh", "-c", "k"]
    post_create = feature_lifecycle_commands(features, "post_create_command")
    assert [c.argvs() for c in post_create] == [
        [("postCreateCommand (Feature ./a)", ["/bin/sh", "-c", "echo a"])],
        [("postCreateCommand:one (Feature ./b)", ["/bin/sh", "-c", "echo b1"]),
         ("postCreateCommand:two (Feature ./b)", ["/bin/sh", "-c", "echo b2"])]]
    assert post_create[1].parallel
    assert [c.argvs() for c in feature_lifecycle_commands(features, "on_create_command")] == [
        [("onCreateCommand (Feature ./a)", ["true"])]]


def test_feature_mounts_get_the_configs_variables(tmp_path: Path) -> None:
    from devsy.devcontainer.config import load_config
    from devsy.devcontainer.image_prepare import config_features

    config_dir = tmp_path / "proj" / ".devcontainer"
    a = _feature(config_dir, "dind", mounts=["source=dind-${devcontainerId},target=/var/lib/docker,type=volume"])
    (config_dir / "devcontainer.json").write_text(json.dumps({"image": "x", "features": {a: {}}}))
    config = load_config(tmp_path / "proj", env={}, devcontainer_id="abc123")
    [feature] = config_features(config)
    assert [(m.source, m.target) for m in feature.metadata.mounts] == [("dind-abc123", "/var/lib/docker")]
