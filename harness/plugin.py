"""The devsy parity harness as a pytest plugin (registered through the `pytest11` entry point): hooks and fixtures.

Run the catalogue:   pytest scenarios -p no:cacheprovider --devsy-report reports/run [-n 2]
Rerun one case:      pytest scenarios --devsy-case 'lifecycle/up-fresh[builtin-docker]'   (or -k lifecycle/up-fresh)
Gate a cutover:      python -m harness validate reports/run --require builtin-docker
"""

from __future__ import annotations

import importlib.util
import signal
from pathlib import Path
from typing import Generator, Iterator

import pytest

from harness import CASE_MARKER, controller
from harness.backends import BackendInspector
from harness.case_context import CaseContext
from harness.catalogue import result_id
from harness.cleanup import CleanupRegistry
from harness.devsy_handle import DevsyHandle
from harness.diagnostics import save_diagnostics
from harness.options import DEFAULT_CASE_TIMEOUT, DEFAULT_CLEANUP_BUDGET, parse_options
from harness.probes import guest_image
from harness.providers import Provider
from harness.recording import build_record
from harness.records import RECORD_PROPERTY, RESULT_ID_PROPERTY
from harness.session import HarnessSession, build_session

SESSION = pytest.StashKey[HarnessSession]()
CONTEXT = pytest.StashKey[CaseContext]()
PHASES = pytest.StashKey[dict[str, pytest.TestReport]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("devsy", "devsy parity harness")
    group.addoption("--devsy-providers", default=None, help="comma-separated provider ids or 'all' (default: all "
                    "the harness can drive; those whose backend probe fails here are reported not runnable)")
    group.addoption("--devsy-require", default=None, help="providers that must run fully: any case of theirs "
                    "skipped, failed or missing fails the session")
    group.addoption("--devsy-report", default=None, metavar="DIR", help="report directory (default "
                    "reports/devsy-<run id>): report.json, junit.xml, parity.md, parity.html, diagnostics/")
    group.addoption("--devsy-keep-on-failure", action="store_true", default=False,
                    help="keep a failed case's instance and print the command that enters it")
    group.addoption("--devsy-case-timeout", type=float, default=DEFAULT_CASE_TIMEOUT, metavar="SECONDS",
                    help="each case body's deadline")
    group.addoption("--devsy-cleanup-budget", type=float, default=DEFAULT_CLEANUP_BUDGET, metavar="SECONDS",
                    help="time budget of each cleanup step")
    group.addoption("--devsy-cli", default=None, metavar="PATH", help="the devsy executable under test "
                    "(default: this project's installed devsy)")
    group.addoption("--devsy-run-id", default=None, help="run id (default: the xdist test-run uid or a new one); "
                    "reusing one sweeps what that run left first")
    group.addoption("--devsy-case", action="append", default=None, metavar="SUITE/CASE[PROVIDER]",
                    help="run only these case or result ids (repeatable, comma-separated); narrows the run")
    group.addoption("--devsy-manifest", default="scenarios.manifest", help="catalogue manifest module or .py path")
    group.addoption("--devsy-suite", action="append", default=None, metavar="SUITE",
                    help="run only these suites, as a shard (repeatable, comma-separated); the report and its "
                    "validation then cover exactly these suites (a shard is not a narrowed run)")
    group.addoption("--devsy-suites-except", action="append", default=None, metavar="SUITE",
                    help="run every suite except these (the catch-all shard of a sharded CI run)")


def _scenarios_dir() -> Path | None:
    spec = importlib.util.find_spec("scenarios")
    return Path(spec.origin).parent.resolve() if spec and spec.origin else None


def _not_ignored_in_children() -> None:
    """A shell starts a background job with SIGINT ignored (POSIX, without job control), `nohup` ignores SIGHUP, and
    every child inherits that: the tests and cases that send devsy a Ctrl-C or a hang-up would then wait on a devsy
    that cannot hear it (devsy keeps an inherited SIG_IGN, termination.py). SIGINT gets Python's own handler back;
    SIGHUP a handler that does nothing, so this run still outlives its terminal as asked. A handler, unlike SIG_IGN,
    is reset to the default by exec: the processes the run starts get the disposition they would from a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, _outlive_hang_up)


def _outlive_hang_up(_signum: int, _frame: object) -> None:
    """nohup's choice for this process, kept without handing SIG_IGN down (see above)."""


def pytest_configure(config: pytest.Config) -> None:
    _not_ignored_in_children()
    config.addinivalue_line("markers", f"{CASE_MARKER}(case_id): a catalogue scenario (suite/case in the manifest)")
    options = parse_options(config)
    session = build_session(config, options, _scenarios_dir())
    config.stash[SESSION] = session
    if session.is_controller:
        config.pluginmanager.register(controller.ControllerPlugin(config, session), "devsy-harness-controller")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    session = node.config.stash[SESSION]  # type: ignore[attr-defined]
    node.workerinput.update(  # type: ignore[attr-defined]
        devsy_run_id=session.options.run_id, devsy_session=session.token, devsy_engaged=session.engaged
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(CASE_MARKER)
    if marker is None:
        return
    session = metafunc.config.stash[SESSION]
    case_id = str(marker.args[0])
    if session.manifest.case(case_id) is None:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: case {case_id!r} is not in {session.manifest.source}")
    providers = session.providers_for(case_id)
    metafunc.parametrize("provider", providers, ids=[p.name for p in providers])


def pytest_itemcollected(item: pytest.Item) -> None:
    marker = item.get_closest_marker(CASE_MARKER)
    provider = _provider(item)
    if marker is not None and provider is not None:
        # `-k suite/case` matches this (pytest's -k accepts '/'); the result id is what reports use.
        item.extra_keyword_matches.add(result_id(str(marker.args[0]), provider.name))
        item.user_properties.append((RESULT_ID_PROPERTY, result_id(str(marker.args[0]), provider.name)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    session = config.stash[SESSION]
    kept, dropped = [], []
    for item in items:
        marker, provider = item.get_closest_marker(CASE_MARKER), _provider(item)
        if marker is not None and provider is None:
            continue  # no selected provider applies to the case (an empty parameter set): nothing to run or record
        if marker is None or provider is None:
            kept.append(item)
            continue
        if not session.in_shard(str(marker.args[0])) or not session.selected(str(marker.args[0]), provider.name):
            dropped.append(item)
            continue
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(session.options.backstop))
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_deselected(items: list[pytest.Item]) -> None:
    if not items:
        return
    session = items[0].config.stash[SESSION]
    # Items outside the run's shard do not narrow it: the report covers exactly its suites.
    items = [item for item in items if session.in_shard(_case_id(item))]
    if items:
        note = f"{len(items)} item(s) deselected"
        if session.is_controller and note not in session.narrowed_by:
            session.narrowed_by.append(note)


@pytest.fixture(autouse=True)
def _devsy_case(request: pytest.FixtureRequest) -> Iterator[CaseContext | None]:
    """The per-case machinery: probe + owned names + deadline before the body, bounded cleanup after it."""
    marker, provider = request.node.get_closest_marker(CASE_MARKER), _provider(request.node)
    if marker is None or provider is None:
        yield None
        return
    session = request.config.stash[SESSION]
    case_id = str(marker.args[0])
    probe = session.prepare(provider)
    limit = session.manifest.simulator_limit(case_id, provider.name)
    if limit is not None:  # declared in the manifest: a skip with its reason, even for a required -sim column
        pytest.skip(f"{provider.name} not runnable on the simulator: {limit}")
    if not probe.allows(needs_boot=session.needs_boot(case_id)):
        message = f"{provider.name} not runnable here: {probe.evidence()}"
        if provider.name in session.options.required:
            pytest.fail(f"required provider {message}", pytrace=False)
        pytest.skip(message)
    ctx = session.new_case(case_id, provider, request.node.nodeid, probe)
    request.node.stash[CONTEXT] = ctx
    yield ctx
    # A failed body with --devsy-keep-on-failure already marked every step kept (pytest_runtest_makereport).
    ctx.cleanup.run()
    phases = request.node.stash.get(PHASES, {})
    if "call" not in phases and session.is_controller:
        # Interrupted mid-body: pytest tears down at session end without reports, so record the case here.
        session.records[ctx.result_id] = build_record(ctx.nodeid, ctx.case_id, provider.name, phases, ctx)
    errors = ctx.cleanup.errors()
    if errors:
        if ctx.diagnostics is None:
            save_diagnostics(ctx, "cleanup failed:\n" + "\n".join(errors), session.probe_of(provider.target))
        pytest.fail(f"cleanup failed for {ctx.result_id} ({len(errors)} step(s)); diagnostics: {ctx.diagnostics}\n"
                    + "\n".join(f"  - {e}" for e in errors), pytrace=False)


@pytest.fixture
def case(_devsy_case: CaseContext | None) -> CaseContext:
    """The running case: owned names (`case.workspace_id()`), `case.workdir`, `case.deadline`."""
    if _devsy_case is None:
        raise pytest.UsageError("the `case` fixture is only for tests marked @devsy_case")
    return _devsy_case


@pytest.fixture
def devsy(case: CaseContext) -> DevsyHandle:
    """The real devsy CLI, bounded by the case deadline, pointed at the run's owned DEVSY_HOME and SSH config."""
    return case.devsy


@pytest.fixture
def backend(case: CaseContext) -> BackendInspector:
    """The harness's own inspector of the provider's backend (instances and volumes by workspace label)."""
    return case.backend


@pytest.fixture
def cleanup(case: CaseContext) -> CleanupRegistry:
    return case.cleanup


@pytest.fixture
def record_figure(case: CaseContext) -> object:
    """`record_figure(name, value)`: a number the report keeps for this result id (e.g. throughput)."""
    return case.record_figure


@pytest.fixture(scope="session")
def guest_image_tag() -> str:
    return guest_image()[0]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    marker, provider = item.get_closest_marker(CASE_MARKER), _provider(item)
    if marker is None or provider is None:
        return report
    item.stash.setdefault(PHASES, {})[report.when] = report
    ctx = item.stash.get(CONTEXT, None)
    session = item.config.stash[SESSION]
    if report.when == "call" and report.failed and ctx is not None:
        folder = save_diagnostics(ctx, report.longreprtext, session.probe_of(provider.target))
        lines = [f"diagnostics saved under {folder}"]
        if ctx.settings.keep_on_failure:
            lines += [f"instance kept; enter it with: {command}" for command in ctx.keep_instances()]
        _add_section(report, "devsy", "\n".join(lines))
    if report.when == "teardown":
        record = build_record(item.nodeid, str(marker.args[0]), provider.name, item.stash[PHASES], ctx)
        report.user_properties.append((RECORD_PROPERTY, record.to_json()))
    return report


def _case_id(item: pytest.Item) -> str:
    marker = item.get_closest_marker(CASE_MARKER)
    return str(marker.args[0]) if marker is not None else ""


def _provider(item: pytest.Item) -> Provider | None:
    callspec = getattr(item, "callspec", None)
    value = callspec.params.get("provider") if callspec is not None else None
    return value if isinstance(value, Provider) else None


def _add_section(report: pytest.TestReport, title: str, text: str) -> None:
    add_section = getattr(report.longrepr, "addsection", None)
    if callable(add_section):
        add_section(title, text)  # shown inside the failure message itself
    else:
        report.sections.append((title, text))
