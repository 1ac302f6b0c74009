"""The controller's part of a run (the only process without `workerinput`): collect every case record, then write
report.json, the parity table and JUnit, fail the session for a required provider, and sweep the run."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from harness import parity_render, provenance
from harness.parity import build_parity, outcome_counts
from harness.records import RECORD_PROPERTY, CaseRecord
from harness.report import OWNED_REPORT_FILES, REPORT_FILE, Report, write_report_json
from harness.runstate import is_started
from harness.session import HarnessSession
from harness.sweep import sweep_run
from harness.validate import required_problems


class ControllerPlugin:
    def __init__(self, config: pytest.Config, session: HarnessSession) -> None:
        self.config = config
        self.session = session
        self.problems: list[str] = []
        self.written: list[Path] = []
        if hasattr(config.option, "testrunuid") and not config.option.testrunuid:
            # xdist then uses the harness run id as its test-run uid, so workers see the same id.
            config.option.testrunuid = session.options.run_id
        if session.engaged:
            self._prepare_report_dir(config)

    def _prepare_report_dir(self, config: pytest.Config) -> None:
        directory = self.session.options.report_dir
        directory.mkdir(parents=True, exist_ok=True)
        for name in OWNED_REPORT_FILES:
            (directory / name).unlink(missing_ok=True)
        shutil.rmtree(directory / "diagnostics", ignore_errors=True)
        if not getattr(config.option, "xmlpath", None):
            config.option.xmlpath = str(directory / "junit.xml")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == RECORD_PROPERTY:
                record = CaseRecord.from_json(str(value))
                self.session.records[record.result_id] = record
        # The record travelled here as a user property; JUnit keeps only the result id, not the whole record.
        report.user_properties = [(n, v) for n, v in report.user_properties if n != RECORD_PROPERTY]

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        harness = self.session
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and harness.suites is not None and \
                not harness.manifest.expected_results(harness.options.requested, harness.suites):
            # A shard with nothing to run for these providers (an empty catch-all, or suites that apply to other
            # providers only): that is a success, and its report says so.
            session.exitstatus = pytest.ExitCode.OK
        try:
            if harness.engaged or harness.records:
                report = harness.build_report(int(exitstatus), [sys.argv[0], *self.config.invocation_params.args])
                self.problems = required_problems(report, harness.manifest, list(harness.options.required))
                if self.problems and session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
                report.exit_status = int(session.exitstatus)
                report.provenance = provenance.collect(harness.manifest, report.probes)
                self._write(report)
        finally:  # whatever writing the report did, what the run owns is swept
            if is_started(harness.paths):
                kept = frozenset(ws for r in harness.records.values() if r.kept for ws in r.workspaces)
                harness.sweeps.append(sweep_run(harness.options.run_id, harness.options.root, keep_workspaces=kept))

    def _write(self, report: Report) -> None:
        directory = self.session.options.report_dir
        self.session.report = report
        self.written = [write_report_json(report, directory)]
        manifest = self.session.manifest
        self.written += parity_render.write_parity(build_parity(report, manifest), report, directory, manifest)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        harness, report = self.session, self.session.report
        write = terminalreporter.write_line
        if report is None and not harness.sweeps:
            return
        terminalreporter.section("devsy harness")
        if report is not None:
            write(f"run {report.run_id}: {outcome_counts(report)}; wall {report.wall_seconds:.1f}s")
            if report.shard is not None:
                write(f"shard: {', '.join(report.shard) or 'no suite left (every suite has its own shard)'}")
            for line in build_parity(report, harness.manifest).verdicts:
                write(f"verdict {line.sentence()}")
            write(f"parity table: {harness.options.report_dir / 'parity.md'} (and parity.html)")
            require = f" --require {','.join(report.required)}" if report.required else ""
            write(f"report: {harness.options.report_dir / REPORT_FILE}; validate with: "
                  f"python -m harness validate {harness.options.report_dir}{require}")
            if report.narrowed:
                write(f"narrowed run ({', '.join(report.narrowed_by)}): not usable as a gate")
            for rid in sorted(report.results):
                record = report.results[rid]
                if record.diagnostics:
                    write(f"{rid}: {record.outcome}; diagnostics: {record.diagnostics}")
                for command in record.kept:
                    write(f"{rid}: instance kept; enter it with: {command}", yellow=True)
        for problem in self.problems:
            write(f"REQUIRED: {problem}", red=True)
        for sweep in harness.sweeps:
            for error in sweep.errors:
                write(f"sweep error: {error}", red=True)
            if sweep.kept:
                write(f"kept after the run: {', '.join(sweep.kept)}; remove with: python -m harness sweep "
                      f"--run-id {harness.options.run_id}")

