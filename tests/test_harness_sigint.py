"""The catalogue's Ctrl-C cases need devsy to hear SIGINT, also when the catalogue itself was started as a
background job of a script (POSIX shells then start it with SIGINT ignored, and children inherit that)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = '''
import signal, subprocess, sys

def test_a_child_gets_the_default_sigint():
    child = subprocess.run([sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT))"],
                           capture_output=True, text=True, timeout=60)
    assert "default_int_handler" in child.stdout, child.stdout
'''


def test_a_run_started_with_sigint_ignored_gives_its_children_the_default(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE)
    # `trap '' INT` then exec: pytest starts with SIGINT ignored, as a background job of a non-interactive shell.
    script = f"trap '' INT; exec {sys.executable} -m pytest -q -p no:cacheprovider -p no:xdist {tmp_path}"
    done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
