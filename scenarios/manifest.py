"""The scenario catalogue manifest: suites, case ids and applicability (CATALOGUE.md).

Every scenario function carries `@case("suite/case")` naming one entry here; the report validator checks each run
against this list, so a case added here without a scenario (or the reverse) is reported, never silently skipped.
"""

from __future__ import annotations

from harness.catalogue import Applies, Case, Manifest, Suite

EVERY_PROVIDER = Applies()

MANIFEST = Manifest(
    suites=(
        Suite(
            name="lifecycle",
            title="The shared lifecycle and ownership contract",
            cases=(
                Case("up-fresh", "up of an image-only devcontainer writes record + SSH entry; status running"),
                Case("up-reuse", "a second up reuses the same instance (same id and created time)"),
                Case("stop-start", "stop -> stopped; up -> running; created time and instance-local data kept"),
                Case("recreate", "up --recreate: new instance, instance-local data gone, workspace content kept"),
                Case("identity-change-refused", "changed remoteUser refused without --recreate, nothing touched"),
                Case("mount-policy-change-refused", "changed workspace mount refused without --recreate"),
                Case("delete", "instance absent; record, SSH entry, managed content gone; local source kept"),
            ),
        ),
        Suite(
            name="failure-cleanup",
            title="A failing up removes only what it created",
            cases=(
                Case("first-up-failure", "a failing first up leaves no record, SSH entry, content, volume, instance"),
                Case("existing-preserved", "a failing up of an existing workspace keeps record, SSH entry, content"),
            ),
        ),
    ),
)
