"""A run started with SIGINT or SIGHUP ignored (a shell's background job, `nohup`) still hands the processes it
starts the default disposition: the tests and cases that end devsy with a Ctrl-C or a hang-up must be heard."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_CHILD_CHECK = textwrap.dedent('''
    import signal, subprocess, sys

    def test_children_get_the_default_disposition():
        assert signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
        child = subprocess.run([sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGHUP) is "
                                "signal.SIG_DFL, signal.getsignal(signal.SIGINT) is signal.default_int_handler)"],
                               capture_output=True, text=True, check=True)
        assert child.stdout.split() == ["True", "True"], child.stdout
''')

_IGNORING_PARENT = ("import signal, subprocess, sys\n"
                    "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
                    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                    "sys.exit(subprocess.call([sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-q', "
                    "*sys.argv[1:]]))\n")


def test_a_run_under_nohup_hands_its_children_the_default_disposition(tmp_path) -> None:
    check = tmp_path / "test_child_check.py"
    check.write_text(_CHILD_CHECK)
    for extra in ([], ["-n", "2"]):
        run = subprocess.run([sys.executable, "-c", _IGNORING_PARENT, str(check), *extra], capture_output=True,
                             text=True, timeout=120, cwd=tmp_path)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
