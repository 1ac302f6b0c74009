"""The agent's host key: Ed25519 (fast to make and to sign with), generated once per agent install and reused.

Clients do not verify it (the SSH stream runs inside the driver's exec pipe, which the host already authenticated;
see server.py), but a stable key keeps OpenSSH quiet and avoids paying key generation on every connection.
"""

from __future__ import annotations

import io
import os
import tempfile

KEY_FILE = "host_ed25519_key"


def load_or_create(state_dir: str):
    """The paramiko Ed25519Key stored in `state_dir`, creating it (atomically, mode 0600) on first use."""
    import paramiko

    path = os.path.join(state_dir, KEY_FILE)
    try:
        with open(path) as handle:
            return paramiko.Ed25519Key(file_obj=handle)
    except FileNotFoundError:
        pass
    text = _generate()
    fd, tmp = tempfile.mkstemp(dir=state_dir, prefix=".hostkey-")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        try:
            os.link(tmp, path)  # fails if a concurrent first run created it: then both use the file's key
        except FileExistsError:
            with open(path) as handle:
                text = handle.read()
    finally:
        os.unlink(tmp)
    return paramiko.Ed25519Key(file_obj=io.StringIO(text))


def _generate() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
