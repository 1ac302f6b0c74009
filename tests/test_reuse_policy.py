"""The mount policy and ownership labels: the bytes existing instances carry, and the reuse check built on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from devsy.driver.base import LABEL_MOUNT_POLICY, LABEL_REMOTE_USER, RunOptions
from devsy.driver.external.driver import ExternalDriver
from devsy.driver.reuse import MountPolicy, Ownership, check_reuse
from devsy.errors import RecreateRequired
from devsy.runtime.host.testing import fake_command
from devsy.runtime.sdk.reuse import expected_policy

# Labels as earlier devsy versions wrote them (the runner's part, and msb's presentation appended to it).
RECORDED = [
    ("v1;target=/workspaces/p;mode=rw;owner=dev", MountPolicy("/workspaces/p", False, "dev")),
    ("v1;target=/w;mode=ro;owner=root", MountPolicy("/w", True, "root")),
    ("v1;target=/workspaces/p;mode=rw;owner=dev;stat-virt=strict;host-perms=private",
     MountPolicy("/workspaces/p", False, "dev", (("stat-virt", "strict"), ("host-perms", "private")))),
    ("v1;target=/odd;name=x;mode=rw;owner=1000", MountPolicy("/odd;name=x", False, "1000")),
    ("v0;target=/w;mode=rw;owner=dev", MountPolicy("/w", False, "dev", version="v0")),
]
UNREADABLE = ["v1", "garbage", "=v1;target=/w;mode=rw;owner=dev", "v1;mode=rw;target=/w;owner=dev",
              "v1;target=/w;mode=rx;owner=dev", "v1;target=/w;mode=rw", "v1;target=/w;mode=rw;owner=a;owner=b",
              ";target=/w;mode=rw;owner=dev"]
DEV = MountPolicy("/workspaces/p", False, "dev")


@pytest.mark.parametrize(("label", "policy"), RECORDED)
def test_recorded_labels_read_back_and_are_written_byte_for_byte(label: str, policy: MountPolicy) -> None:
    assert MountPolicy.from_label(label) == policy
    assert policy.to_label() == label  # an existing instance's label still matches what this devsy would write


@pytest.mark.parametrize("label", ["", *UNREADABLE])
def test_a_missing_or_unreadable_label_is_no_policy(label: str) -> None:
    assert MountPolicy.from_label(label) is None


def test_extras_are_added_and_split_off_in_order() -> None:
    extended = DEV.with_extras((("stat-virt", "off"), ("host-perms", "mirror")))
    assert extended.to_label() == "v1;target=/workspaces/p;mode=rw;owner=dev;stat-virt=off;host-perms=mirror"
    assert extended.split_extras(["host-perms"]) == (DEV.with_extras((("stat-virt", "off"),)),
                                                     (("host-perms", "mirror"),))


def test_ownership_labels_are_the_two_the_check_reads() -> None:
    assert Ownership("dev", DEV).to_labels() == {LABEL_REMOTE_USER: "dev", LABEL_MOUNT_POLICY: DEV.to_label()}
    assert Ownership("dev", None).to_labels() == {LABEL_REMOTE_USER: "dev"}


def test_the_same_owner_and_policy_may_reuse() -> None:
    check_reuse("ws", Ownership("dev", DEV).to_labels(), Ownership("dev", DEV))
    check_reuse("ws", {}, Ownership("", None))  # nothing recorded, nothing requested (a provider's own check)


@pytest.mark.parametrize(("requested", "change"), [
    (Ownership("alt", DEV), "remote user 'dev' -> 'alt'"),
    (Ownership("dev", MountPolicy("/workspaces/p", True, "dev")), "workspace mount policy"),
    (Ownership("dev", MountPolicy("/workspaces/moved", False, "dev")), "target=/workspaces/moved"),
    (Ownership("dev", None), "workspace mount policy"),
])
def test_another_owner_or_policy_is_refused_with_recreate_guidance(requested: Ownership, change: str) -> None:
    with pytest.raises(RecreateRequired) as refused:
        check_reuse("ws", Ownership("dev", DEV).to_labels(), requested)
    assert change in refused.value.message and "nothing was changed" in refused.value.message
    assert "--recreate" in refused.value.hint


@pytest.mark.parametrize("label", UNREADABLE)
def test_an_unreadable_recorded_policy_never_matches(label: str) -> None:
    labels = {LABEL_REMOTE_USER: "dev", LABEL_MOUNT_POLICY: label}
    for requested in (DEV, expected_policy(label, "dev")):  # the host's policy, and the provider side's (None)
        with pytest.raises(RecreateRequired, match="workspace mount policy"):
            check_reuse("ws", labels, Ownership("dev", requested))


def test_external_driver_checks_the_labels_itself_when_the_provider_has_no_reuse_preflight(tmp_path: Path) -> None:
    driver = ExternalDriver("external:devsy-fake-runtime", fake_command(tmp_path, "--profile", "legacy"))
    try:
        assert not driver.capabilities().reuse_preflight and driver.description.api_minor == 1
        driver.run("ws", RunOptions(image="img", remote_user="dev", labels=Ownership("dev", DEV).to_labels()))
        driver.reuse_preflight("ws", "dev", DEV)
        with pytest.raises(RecreateRequired, match="remote user 'dev' -> 'alt'"):
            driver.reuse_preflight("ws", "alt", MountPolicy("/workspaces/p", False, "alt"))
        with pytest.raises(RecreateRequired, match="workspace mount policy"):
            driver.reuse_preflight("ws", "dev", MountPolicy("/workspaces/p", True, "dev"))
    finally:
        driver.close()


def test_a_provider_that_reports_no_labels_is_not_refused_for_labels_it_never_showed(tmp_path: Path) -> None:
    # Find need not echo RunImage's labels: with none of devsy's to compare, the host check has nothing to refuse on
    # (a refusal there would make every reuse of such a provider demand --recreate).
    driver = ExternalDriver("external:devsy-fake-runtime",
                            fake_command(tmp_path, "--profile", "legacy", "--mode", "find-without-labels"))
    try:
        driver.run("ws", RunOptions(image="img", remote_user="dev", labels=Ownership("dev", DEV).to_labels()))
        found = driver.find("ws")
        assert found is not None and found.labels == {}
        driver.reuse_preflight("ws", "dev", DEV)
    finally:
        driver.close()
