"""The first code of a bundle built by devsy (the agent, or a provider executable): unpack the bundled wheels once,
then start the bundled program.

Stdlib only, and no syntax newer than Python 3.0, so that a too-old guest python3 gets a clear error, not a crash.

Native modules cannot be imported from inside a zip, so the wheels bundled in the zipapp are unpacked to
`<cache>/devsy-agent/<build>/<python tag>`; later runs find that directory and import from it without opening the zip
again. The directory appears atomically (unpacked to a temporary sibling, then renamed), so concurrent first runs are
safe: one rename wins and the others use its result.

When modules are byte-compiled depends on the bundle. The agent is unpacked in every new workspace and always run by
root with -E -S (so its imports write their own __pycache__): it compiles modules as they are first imported, since
85 of its 204 are never imported (cffi and pycparser, which only build C bindings; a third of cryptography), and
compiling them all cost its first `setup` ~350 ms of ~560 in the guest. A provider bundle is unpacked once per
machine and started by every command, by whoever runs it (PYTHONDONTWRITEBYTECODE, -B or another user's cache would
leave its imports compiled in memory on every start): it compiles everything at the unpack.
"""

import os
import sys

MIN_PYTHON = (3, 9)
EXIT_UNSUPPORTED = 3


def run(build: str, machine: str, wheels: dict, argv: list, entry: str = "") -> int:
    """Entry point called by the zipapp's generated __main__. `entry` ("module:function", called with argv) names
    the bundled program when it is not the agent; `wheels` may name its packages and program name."""
    tag = "cp%d%d" % sys.version_info[:2]
    problem = _unsupported(tag, machine, wheels)
    if problem:
        sys.stderr.write("%s: %s\n" % (wheels.get("name", "devsy-agent"), problem))
        return EXIT_UNSUPPORTED
    archive = os.path.dirname(os.path.abspath(__file__))
    site = find_site(build, tag) or unpack(archive, build, tag, wheels, compile_all=bool(entry))
    sys.path.insert(0, site)
    if entry:
        module_name, function = entry.split(":")
        module = __import__(module_name, fromlist=[function])
        return getattr(module, function)(argv)
    from devsy_agent.main import main  # from the unpacked copy

    return main(argv, site=site, build=build)


def _unsupported(tag: str, machine: str, wheels: dict) -> str:
    if sys.implementation.name != "cpython" or sys.version_info < MIN_PYTHON:
        return "needs CPython >= %d.%d, this is %s %s" % (
            MIN_PYTHON[0], MIN_PYTHON[1], sys.implementation.name, sys.version.split()[0])
    if tag not in wheels["per_tag"]:
        return "this bundle has no wheels for Python %s (it has %s); use a supported python3 here" % (
            sys.version.split()[0], ", ".join(sorted(wheels["per_tag"])))
    if os.uname().machine != machine:
        return "this bundle is built for %s but this machine is %s" % (machine, os.uname().machine)
    return ""


def cache_candidates(build: str) -> list:
    """Where the unpacked wheels may live, in order: $DEVSY_AGENT_CACHE, the user's cache dir, a private /tmp dir."""
    bases = []
    explicit = os.environ.get("DEVSY_AGENT_CACHE", "")
    if explicit:
        bases.append(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME", "") or os.path.join(os.path.expanduser("~"), ".cache")
    bases.append(os.path.join(xdg, "devsy-agent"))
    bases.append("/tmp/devsy-agent-%d" % os.getuid())
    return [os.path.join(base, build) for base in bases]


def find_site(build: str, tag: str) -> str:
    for parent in cache_candidates(build):
        site = os.path.join(parent, tag)
        if os.path.isdir(site) and _trusted(parent):
            return site
    return ""


def _trusted(parent: str) -> bool:
    # A shared /tmp lets another user create our directory first and plant modules in it: only use a tree we own.
    if not parent.startswith("/tmp/"):
        return True
    try:
        info = os.stat(os.path.dirname(parent))
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & 0o022


def unpack(archive: str, build: str, tag: str, wheels: dict, compile_all: bool = False) -> str:
    """Unpack into the first writable candidate; returns the site directory."""
    errors = []
    for parent in cache_candidates(build):
        try:
            _make_private_dirs(parent)
            if not _trusted(parent):
                errors.append("%s: not owned by this user" % parent)
                continue
            return _unpack_into(archive, parent, tag, wheels, compile_all)
        except OSError as exc:
            errors.append("%s: %s" % (parent, exc.strerror or exc))
    raise SystemExit("devsy-agent: cannot unpack its libraries anywhere (%s); make $HOME/.cache or /tmp writable "
                     "or set DEVSY_AGENT_CACHE to a writable directory" % "; ".join(errors))


def _make_private_dirs(parent: str) -> None:
    base = os.path.dirname(parent)
    os.makedirs(base, mode=0o700 if base.startswith("/tmp/") else 0o755, exist_ok=True)
    os.makedirs(parent, exist_ok=True)


def _unpack_into(archive: str, parent: str, tag: str, wheels: dict, compile_all: bool) -> str:
    import shutil
    import tempfile
    import zipfile

    site = os.path.join(parent, tag)
    tmp = tempfile.mkdtemp(dir=parent, prefix=".unpack-%s-" % tag)
    try:
        with zipfile.ZipFile(archive) as bundle:
            for name in list(wheels["common"]) + list(wheels["per_tag"][tag]):
                _extract_wheel(bundle, "wheels/" + name, tmp)
            packages = tuple(wheels.get("packages", ["devsy_agent/"]))
            for info in bundle.infolist():
                if info.filename.startswith(packages) and not info.is_dir():
                    _write(os.path.join(tmp, info.filename), bundle.read(info), 0o644)
        if compile_all:
            _compile(tmp, site)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, site)
        except OSError:
            if not os.path.isdir(site):
                raise
            # A concurrent first run renamed its copy first; it is identical, use it.
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return site


def _extract_wheel(bundle, member: str, dest: str) -> None:
    import io
    import zipfile

    with zipfile.ZipFile(io.BytesIO(bundle.read(member))) as wheel:
        for info in wheel.infolist():
            if info.is_dir():
                continue
            name = _install_name(info.filename)
            if name:
                mode = (info.external_attr >> 16) & 0o777 or 0o644
                _write(os.path.join(dest, name), wheel.read(info), mode | 0o644)


def _install_name(name: str) -> str:
    """Where a wheel member goes in the site dir ("" = skip): purelib/platlib data is flattened, the rest skipped."""
    parts = name.split("/")
    if name.startswith("/") or ".." in parts:
        raise OSError("unsafe path %r in a bundled wheel" % name)
    if parts[0].endswith(".data"):
        if len(parts) > 2 and parts[1] in ("purelib", "platlib"):
            return "/".join(parts[2:])
        return ""
    return name


def _write(path: str, data: bytes, mode: int) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _compile(tmp: str, site: str) -> None:
    import compileall
    import py_compile

    compileall.compile_dir(tmp, quiet=2, ddir=site, workers=1,
                           invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
