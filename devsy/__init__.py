"""devsy: dev environments from devcontainer.json on Docker or MicroSandbox microVMs."""

import os
import sys

# The docker SDK imports its ssh:// transport (and with it paramiko and cryptography, ~170 ms) on import, whether
# or not it is used, and every `devsy exec` pays that. The SDK treats that transport as optional (it catches the
# ImportError), so unless DOCKER_HOST asks for ssh we mark the module unavailable. paramiko itself stays importable.
if not os.environ.get("DOCKER_HOST", "").startswith("ssh://"):
    sys.modules.setdefault("docker.transport.sshconn", None)  # type: ignore[arg-type]
