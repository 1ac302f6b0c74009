"""Importing this module keeps the docker SDK from loading its ssh:// transport, unless DOCKER_HOST asks for ssh.

The SDK imports that transport (and with it paramiko and cryptography, ~170 ms) on `import docker`, whether or not
it is used; it treats the transport as optional (it catches the ImportError), so marking the module unavailable is
safe. Only the entry points where start-up time matters import this (devsy's CLI, the provider executables, the SSH
master), as their first devsy import; a library user of devsy gets the SDK as it is. paramiko itself stays
importable.
"""

import os
import sys

if not os.environ.get("DOCKER_HOST", "").startswith("ssh://"):
    sys.modules.setdefault("docker.transport.sshconn", None)  # type: ignore[arg-type]
