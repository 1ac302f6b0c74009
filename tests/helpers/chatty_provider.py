"""A Go-style chatty provider: devsy's fake runtime, served by devsy's SDK, that prints CHATTY_BYTES (default 10 MiB)
on its stdout (the go-plugin stdio stream, after the handshake) before it runs an exec whose argv starts with
`chatty`, then runs the rest of the argv as the fake does. As with go-plugin, a print blocks until the host drains
the stream: a host that does not would never see the exec finish.

Every 64 KiB block holds one line with the value of CHATTY_SECRET (a provider option, so a secret of the host's),
one line longer than the host's line bound, and a terminal escape. When the last block is out, the total goes to
$CHATTY_RECORD (if set) so a test can tell the provider wrote it all. An argv starting with `chatty-child` instead
has a child process write one line on the provider's sys.stdout (`subprocess.run(..., stdout=sys.stdout)`).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

from devsy.driver.base import ExecRequest, ExecResult
from devsy.runtime.fake.driver import FakeDriver
from devsy.runtime.fake.main import VERSION
from devsy.runtime.fake.modes import Mode
from devsy.runtime.fake.state import StateStore
from devsy.runtime.sdk import ProviderInfo, serve

BLOCK = 64 * 1024


def chatter_block(index: int, secret: str) -> str:
    lines = [f"chatty line {index}: the secret is {secret}", f"chatty long line {index}: " + "x" * 5000,
             f"chatty escape {index}: \x1b[2J\r"]
    filler = f"chatty filler {index} " + "." * 80
    text = "\n".join(lines) + "\n"
    while len(text) + len(filler) + 1 <= BLOCK:
        text += filler + "\n"
    return text + "#" * (BLOCK - len(text) - 1) + "\n"


class ChattyDriver(FakeDriver):
    def exec(self, workspace_id: str, request: ExecRequest) -> ExecResult:
        if request.argv[:1] == ["chatty"]:
            total = int(os.environ.get("CHATTY_BYTES", str(10 * 1024 * 1024)))
            secret = os.environ.get("CHATTY_SECRET", "")
            for index in range(total // BLOCK):
                sys.stdout.write(chatter_block(index, secret))
            sys.stdout.flush()
            if os.environ.get("CHATTY_RECORD"):
                Path(os.environ["CHATTY_RECORD"]).write_text(str(total // BLOCK * BLOCK))
            request = dataclasses.replace(request, argv=request.argv[1:])
        elif request.argv[:1] == ["chatty-child"]:
            subprocess.run(["echo", "chatty child line"], stdout=sys.stdout, check=True)
            request = dataclasses.replace(request, argv=request.argv[1:])
        return super().exec(workspace_id, request)


def main() -> int:
    mode = Mode(os.environ.get("DEVSY_FAKE_MODE") or "normal")
    driver = ChattyDriver(StateStore(Path(os.environ["DEVSY_FAKE_STATE_DIR"])), mode)
    info = ProviderInfo(driver_name="fake", driver_version=VERSION, runtime_name="chatty-provider",
                        runtime_version=VERSION)
    return serve(driver, info)


if __name__ == "__main__":
    sys.exit(main())
