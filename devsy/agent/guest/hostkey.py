"""The agent's host key: Ed25519 (fast to make and to sign with), generated once per agent install and reused.

Clients do not verify it (the SSH stream runs inside the driver's exec pipe, which the host already authenticated;
see server.py), but a stable key keeps OpenSSH quiet and avoids paying key generation on every connection.
"""

from __future__ import annotations

import base64
import io
import os
import struct
import tempfile

KEY_FILE = "host_ed25519_key"
_MAGIC = b"openssh-key-v1\x00"


def public_line(state_dir: str) -> str:
    """The host key's public half as `TYPE BASE64` (creating the key first if there is none).

    Read from the key file, whose openssh-key-v1 format keeps the public key unencrypted ahead of the private part
    (OpenSSH's PROTOCOL.key): `setup`, which reports it on every `devsy up`, then imports neither paramiko nor
    cryptography (~50 ms in a guest). A file this cannot read goes through paramiko, which says what is wrong."""
    try:
        with open(os.path.join(state_dir, KEY_FILE), "rb") as handle:
            blob = _public_blob(handle.read())
    except FileNotFoundError:
        blob = None
    if blob is not None:
        return "%s %s" % (_string_at(blob, 0)[0].decode("ascii"), base64.b64encode(blob).decode("ascii"))
    from .fastimport import import_paramiko

    import_paramiko()
    key = load_or_create(state_dir)
    return "%s %s" % (key.get_name(), key.get_base64())


def _public_blob(text: bytes) -> bytes | None:
    """The first public key blob of an unencrypted or encrypted openssh-key-v1 file, or None when it is not one."""
    lines = text.strip().splitlines()
    if len(lines) < 3 or lines[0] != b"-----BEGIN OPENSSH PRIVATE KEY-----" or \
            lines[-1] != b"-----END OPENSSH PRIVATE KEY-----":
        return None
    try:
        data = base64.b64decode(b"".join(lines[1:-1]), validate=True)
        if not data.startswith(_MAGIC):
            return None
        offset = len(_MAGIC)
        for _ in range(3):  # cipher name, KDF name, KDF options
            offset = _string_at(data, offset)[1]
        if struct.unpack_from(">I", data, offset)[0] < 1:
            return None
        blob = _string_at(data, offset + 4)[0]
        _string_at(blob, 0)[0].decode("ascii")  # the key type names the line
    except (ValueError, struct.error, UnicodeDecodeError):
        return None
    return blob


def _string_at(data: bytes, offset: int) -> tuple[bytes, int]:
    """An SSH `string` (uint32 length, then the bytes) at `offset`, and the offset after it."""
    (length,) = struct.unpack_from(">I", data, offset)
    end = offset + 4 + length
    if end > len(data):
        raise ValueError("a string past the end of the key")
    return data[offset + 4:end], end


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
