"""resources: what CPU and memory the guest gets, live resize, boot ceilings and invalid options
(Go: provider_microsandbox_resources.go).

Docker: devsy's Docker provider has no CPU or memory option, and hostRequirements are minimums the engine's machine
must meet (devsy/driver/host_minimums.py), never limits: a met requirement leaves the container's own cgroup (v1 or
v2, read here) without a CPU quota or memory limit. MicroSandbox: the provider option wins over hostRequirements, then the 2048 MiB / 1 CPU
default; the guest's processor count and MemTotal are the proof, with `msb inspect`'s active resources.

The zero-value rule: the Go driver reads MICROSANDBOX_MEMORY=0 / MICROSANDBOX_CPUS=0 as "use hostRequirements",
because a Go provider option cannot be unset (its declared default stands in for "absent"). devsy's options can:
an empty value already means "use hostRequirements, else the default", so 0 is refused like any other
non-positive value (devsy/driver/microsandbox/options.py) and nothing invalid is ever silently replaced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from devsy.bounded_wait import poll_until
from harness import case
from harness.backends import BackendInspector
from harness.backends.microsandbox import MicrosandboxInspector
from harness.case_context import CaseContext
from harness.commands import run_bounded
from harness.devsy_handle import DevsyHandle
from harness.providers import Provider
from scenarios.support import assert_fully_gone, local_source, managed_content_dir, only_instance

MIB = 1024**2
# MemTotal excludes what the guest kernel reserves: the Go suite's non-overlapping 128 MiB allowance.
MEMTOTAL_SLACK_MIB = 128
# The pinned runtime's live-resize tests allow 60 s for the guest to converge (the Go suite's bound).
CONVERGE_S = 60.0
MSB_CALL_S = 60.0
# cgroup v2 first, else v1: quota period memory-limit, as the container sees its own cgroup.
CGROUP_LIMITS = (
    "if [ -f /sys/fs/cgroup/cpu.max ]; then read q p < /sys/fs/cgroup/cpu.max; m=$(cat /sys/fs/cgroup/memory.max);"
    " else q=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us); p=$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us);"
    " m=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes); fi; echo \"$q $p $m\""
)
# cgroup v1 reports "no limit" as a page-rounded 2**63-1; anything this large is no limit.
UNLIMITED_FLOOR = 2**62
GUEST_RESOURCES = ("printf '%s %s\\n' \"$(grep -c '^processor' /proc/cpuinfo)\" "
                   "\"$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)\"")


@dataclass(frozen=True)
class Sizing:
    """One row of `effective`: provider options + hostRequirements -> what the guest must see (None = no limit)."""

    name: str
    cpus: int | None
    memory_mib: int | None
    options: tuple[str, ...] = ()
    host_requirements: dict[str, Any] = field(default_factory=dict)


SIZINGS = {
    # Docker checks hostRequirements as minimums and sets no cgroup limit from them, with or without them.
    "docker": (
        Sizing("no-requirements", cpus=None, memory_mib=None),
        Sizing("requirements", cpus=None, memory_mib=None, host_requirements={"cpus": 1, "memory": "512mb"}),
        Sizing("memory-only", cpus=None, memory_mib=None, host_requirements={"memory": "768mb"}),
    ),
    # The Go table's rows; its "zero delegates to hostRequirements" row is hostRequirements alone here (see above).
    "microsandbox": (
        Sizing("provider-defaults", cpus=1, memory_mib=2048),
        Sizing("options-override-requirements", cpus=2, memory_mib=1536,
               options=("MICROSANDBOX_MEMORY=1536", "MICROSANDBOX_CPUS=2"),
               host_requirements={"cpus": 1, "memory": "1gb"}),
        Sizing("requirements-only", cpus=2, memory_mib=1024, host_requirements={"cpus": 2, "memory": "1gb"}),
    ),
}


@case("resources/effective")
def test_effective(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    for sizing in SIZINGS[provider.backend]:
        extra = {"hostRequirements": sizing.host_requirements} if sizing.host_requirements else {}
        source = local_source(case, f"src-{sizing.name}", **extra)
        wid = case.workspace_id(sizing.name)
        devsy.up(source, wid, options=sizing.options).ws()
        if provider.backend == "docker":
            _expect_cgroup(devsy, wid, sizing)
        else:
            msb = _msb_inspector(backend)
            name = only_instance(backend, wid).name
            active = _active_resources(msb, name)
            assert active == _msb_expected(sizing.cpus or 1, sizing.memory_mib or 0, sizing.cpus or 1,
                                           sizing.memory_mib or 0), f"{sizing.name}: msb inspect shows {active}"
            _expect_guest(devsy, wid, sizing.cpus or 1, sizing.memory_mib or 0, sizing.name)
        devsy.delete(wid).expect_success()  # one instance at a time: the host has little memory to spare


def _expect_cgroup(devsy: DevsyHandle, workspace_id: str, sizing: Sizing) -> None:
    quota, period, memory = devsy.sh(workspace_id, CGROUP_LIMITS).split()
    cpus = None if quota in ("max", "-1") else int(quota) / int(period)
    limit = None if memory == "max" or int(memory) >= UNLIMITED_FLOOR else int(memory)
    seen = (cpus, limit)
    want = (sizing.cpus, sizing.memory_mib * MIB if sizing.memory_mib else None)
    assert seen == want, f"{sizing.name}: the container's cgroup allows (cpus, memory bytes) {seen}, expected {want}"


@case("resources/hotplug")
def test_hotplug(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    source = local_source(case)
    wid = case.workspace_id()
    devsy.up(source, wid, options=("MICROSANDBOX_MEMORY=1024", "MICROSANDBOX_CPUS=1",
                                   "MICROSANDBOX_MAX_MEMORY=1536", "MICROSANDBOX_MAX_CPUS=2")).ws()
    msb = _msb_inspector(backend)
    instance = only_instance(backend, wid)
    expected = _msb_expected(1, 1024, 2, 1536)
    assert _active_resources(msb, instance.name) == expected
    _expect_guest(devsy, wid, 1, 1024, "at boot")
    boot_id = devsy.sh(wid, "cat /proc/sys/kernel/random/boot_id").strip()
    assert boot_id, "the guest has no boot id"
    devsy.sh(wid, "printf 'preserved\\n' > /tmp/resource-parity-marker")

    # devsy has no resize command: the runtime's own, on the sandbox devsy made (as the Go suite does).
    plan = _modify(msb, instance.name, "--cpus", "2", "--memory", "1536M")
    _expect_plan(plan, applied=True, disposition="live", fields=("cpus", "memory"))
    expected = _msb_expected(2, 1536, 2, 1536)
    _expect_guest(devsy, wid, 2, 1536, "after a live resize")
    assert _active_resources(msb, instance.name) == expected

    for target in (("--cpus", "3"), ("--memory", "2048M")):
        plan = _modify(msb, instance.name, *target, refused=True)
        _expect_plan(plan, applied=False, disposition="requires restart", fields=(target[0].removeprefix("--"),))
        assert _active_resources(msb, instance.name) == expected, f"a refused {target} changed the resources"
    _expect_guest(devsy, wid, 2, 1536, "after refused resizes")
    assert only_instance(backend, wid).created_at == instance.created_at, "a resize replaced the sandbox"
    assert devsy.sh(wid, "cat /proc/sys/kernel/random/boot_id").strip() == boot_id, "a resize rebooted the guest"
    assert devsy.sh(wid, "cat /tmp/resource-parity-marker") == "preserved\n", "a resize lost instance-local data"


@dataclass(frozen=True)
class Ceiling:
    """Options (and hostRequirements) whose boot ceiling is below the effective value; the option the error names."""

    name: str
    options: tuple[str, ...]
    names: str
    host_requirements: dict[str, Any] = field(default_factory=dict)


CEILINGS = (
    Ceiling("cpus", ("MICROSANDBOX_CPUS=2", "MICROSANDBOX_MAX_CPUS=1"), "MICROSANDBOX_MAX_CPUS"),
    Ceiling("memory", ("MICROSANDBOX_MEMORY=1024", "MICROSANDBOX_MAX_MEMORY=512"), "MICROSANDBOX_MAX_MEMORY"),
    # Beyond the Go table: the effective value from hostRequirements, and from the 2048 MiB default.
    Ceiling("cpus-requirements", ("MICROSANDBOX_MAX_CPUS=1",), "MICROSANDBOX_MAX_CPUS", {"cpus": 2}),
    Ceiling("memory-requirements", ("MICROSANDBOX_MAX_MEMORY=512",), "MICROSANDBOX_MAX_MEMORY", {"memory": "1gb"}),
    Ceiling("memory-default", ("MICROSANDBOX_MAX_MEMORY=1024",), "MICROSANDBOX_MAX_MEMORY"),
)


# The refusal is devsy's usage error (exit 2) on every provider: an external provider answers INVALID_ARGUMENT with
# devsy's kind in the RuntimeError details, and the host restores the built-in driver's class from it.
CEILING_REFUSAL = "usage"
CEILING_EXIT = 2


@case("resources/ceilings")
def test_ceilings(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    for ceiling in CEILINGS:
        extra = {"hostRequirements": ceiling.host_requirements} if ceiling.host_requirements else {}
        source = local_source(case, f"src-{ceiling.name}", **extra)
        wid = case.workspace_id(ceiling.name)
        outcome = devsy.up(source, wid, options=ceiling.options)
        error = outcome.expect_error(CEILING_REFUSAL)
        assert outcome.exit_code == CEILING_EXIT, f"{ceiling.name}: exit {outcome.exit_code}, not {CEILING_EXIT}"
        assert ceiling.names in error.message, f"{ceiling.name}: the refusal does not name {ceiling.names}: {error}"
        assert_fully_gone(devsy, backend, wid, managed_content_dir(devsy, wid))


@dataclass(frozen=True)
class BadValue:
    kind: str
    value: str


# Distinctive values, so "never its value" is checked by absence from everything devsy printed.
NON_POSITIVE, OVERFLOW, NON_NUMERIC = (BadValue("non-positive", "-48213"), BadValue("overflow", "4294967296123"),
                                       BadValue("non-numeric", "9s3cr3tQ"))
ZERO = BadValue("zero", "0")  # refused: see the zero-value rule in the module docstring
# Every numeric option by backend, with the values each must refuse. STOP_TIMEOUT takes 0 (kill at once).
NUMERIC_OPTIONS: dict[str, dict[str, tuple[BadValue, ...]]] = {
    "docker": {"STOP_TIMEOUT": (NON_POSITIVE, BadValue("overflow", "601"), OVERFLOW, NON_NUMERIC)},
    "microsandbox": {
        **{name: (ZERO, NON_POSITIVE, OVERFLOW, NON_NUMERIC, BadValue("non-numeric", "1.5"))
           for name in ("MICROSANDBOX_MEMORY", "MICROSANDBOX_MAX_MEMORY", "MICROSANDBOX_STORAGE")},
        **{name: (ZERO, NON_POSITIVE, BadValue("overflow", "256"), OVERFLOW, NON_NUMERIC)
           for name in ("MICROSANDBOX_CPUS", "MICROSANDBOX_MAX_CPUS")},
        "INACTIVITY_TIMEOUT": (NON_POSITIVE, OVERFLOW, NON_NUMERIC),
    },
}


@case("resources/invalid-option")
def test_invalid_option(provider: Provider, case: CaseContext, devsy: DevsyHandle, backend: BackendInspector) -> None:
    source = local_source(case)
    wid = case.workspace_id()
    for name, values in NUMERIC_OPTIONS[provider.backend].items():
        for bad in values:
            outcome = devsy.up(source, wid, options=(f"{name}={bad.value}",))
            error = outcome.expect_error("usage")
            where = f"{name}={bad.value} ({bad.kind})"
            assert name in error.message, f"{where}: the error does not name the option: {error}"
            printed = outcome.record.stdout_tail + outcome.record.stderr_tail
            if len(bad.value) > 1:  # a one-digit value occurs in any text; the long ones must not
                assert bad.value not in printed, f"{where}: devsy printed the option's value:\n{printed}"
            assert backend.instances(wid) == [], f"{where}: an instance was created"
    # One workspace id for every attempt: whatever any of them left behind is still there to be found.
    assert_fully_gone(devsy, backend, wid, managed_content_dir(devsy, wid))


def _msb_inspector(backend: BackendInspector) -> MicrosandboxInspector:
    assert isinstance(backend, MicrosandboxInspector), f"not a MicroSandbox inspector: {backend!r}"
    return backend


def _msb_expected(cpus: int, memory_mib: int, max_cpus: int, max_memory_mib: int) -> dict[str, int]:
    return {"cpus": cpus, "memory_mib": memory_mib, "max_cpus": max_cpus, "max_memory_mib": max_memory_mib}


def _active_resources(msb: MicrosandboxInspector, name: str) -> dict[str, int]:
    completed = run_bounded([msb.msb, "inspect", name, "--format", "json"], timeout=MSB_CALL_S)
    assert completed.exit_code == 0, f"msb inspect {name}: exit {completed.exit_code}: {completed.stderr[-2000:]!r}"
    active = json.loads(completed.stdout).get("active_config")
    assert active, f"the running sandbox {name} has no active_config"
    resources = active.get("resources") or {}
    return {key: resources.get(key) for key in ("cpus", "memory_mib", "max_cpus", "max_memory_mib")}


def _modify(msb: MicrosandboxInspector, name: str, *args: str, refused: bool = False) -> dict[str, Any]:
    completed = run_bounded([msb.msb, "modify", name, *args, "--format", "json"], timeout=MSB_CALL_S)
    assert not completed.timed_out, f"msb modify {name} {args} did not finish within {MSB_CALL_S:g}s"
    assert (completed.exit_code != 0) == refused, (
        f"msb modify {name} {args}: exit {completed.exit_code}, expected {'refusal' if refused else 'success'}: "
        f"{completed.stderr[-2000:]!r}")
    return json.loads(completed.stdout)


def _expect_plan(plan: dict[str, Any], *, applied: bool, disposition: str, fields: tuple[str, ...]) -> None:
    changes = sorted((c.get("field"), c.get("disposition")) for c in plan.get("changes", []))
    assert plan.get("applied") is applied and changes == sorted((f, disposition) for f in fields), \
        f"msb's resize plan {plan}, expected applied={applied} with {fields} {disposition!r}"


def _expect_guest(devsy: DevsyHandle, workspace_id: str, cpus: int, memory_mib: int, when: str) -> None:
    """The guest's processor count and MemTotal converge to the expected values (bounded, as the Go suite)."""
    def converged(seen: tuple[int, int]) -> bool:
        count, mem_kib = seen
        return count == cpus and (memory_mib - MEMTOTAL_SLACK_MIB) * 1024 < mem_kib <= memory_mib * 1024

    def read() -> tuple[int, int]:
        count, mem_kib = devsy.sh(workspace_id, GUEST_RESOURCES).split()
        return int(count), int(mem_kib)

    poll_until(read, converged, timeout=CONVERGE_S, interval=1.0,
               what=f"the guest showing {cpus} CPUs and about {memory_mib} MiB {when} (processors, MemTotal KiB)")
