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
_KEY_TYPE = b"ssh-ed25519"


def public_line(state_dir: str) -> str:
    """The host key's public half as `ssh-ed25519 BASE64` (creating the key first if there is none).

    Read from the key file itself (OpenSSH's PROTOCOL.key format), so that `setup`, which reports it on every `devsy
    up`, imports neither paramiko nor cryptography (~50 ms in a guest). Only a whole, unencrypted, single Ed25519 key
    whose private part repeats its public key is read here; any other file goes through paramiko, which is what the
    SSH server loads it with, so `setup` fails where the server would."""
    try:
        with open(os.path.join(state_dir, KEY_FILE), "rb") as handle:
            blob = _ed25519_public_blob(handle.read())
    except FileNotFoundError:
        blob = None
    if blob is not None:
        return "ssh-ed25519 " + base64.b64encode(blob).decode("ascii")
    from .fastimport import import_paramiko

    import_paramiko()
    key = load_or_create(state_dir)
    return "%s %s" % (key.get_name(), key.get_base64())


def _ed25519_public_blob(text: bytes) -> bytes | None:
    """The public key blob of an openssh-key-v1 file holding exactly one unencrypted Ed25519 key, checked against
    its private part; None for anything else."""
    lines = text.strip().splitlines()
    if len(lines) < 3 or lines[0] != b"-----BEGIN OPENSSH PRIVATE KEY-----" or \
            lines[-1] != b"-----END OPENSSH PRIVATE KEY-----":
        return None
    try:
        data = base64.b64decode(b"".join(lines[1:-1]), validate=True)
        if not data.startswith(_MAGIC):
            return None
        fields, offset = _strings(data, len(_MAGIC), 3)  # cipher name, KDF name, KDF options
        if fields != [b"none", b"none", b""] or struct.unpack_from(">I", data, offset)[0] != 1:
            return None
        (blob, private), end = _strings(data, offset + 4, 2)
        if end != len(data):
            return None
        (key_type, public), blob_end = _strings(blob, 0, 2)
        if key_type != _KEY_TYPE or len(public) != 32 or blob_end != len(blob):
            return None
        check1, check2 = struct.unpack_from(">II", private, 0)
        (key_type, repeated, secret, _comment), private_end = _strings(private, 8, 4)
        padding = private[private_end:]
        if check1 != check2 or key_type != _KEY_TYPE or repeated != public or len(secret) != 64 or \
                secret[32:] != public or padding != bytes(range(1, len(padding) + 1)) or len(private) % 8:
            return None
    except (ValueError, struct.error):
        return None
    return blob


def _strings(data: bytes, offset: int, count: int) -> tuple[list[bytes], int]:
    """`count` SSH `string`s (uint32 length, then the bytes) from `offset`, and the offset after them."""
    values = []
    for _ in range(count):
        (length,) = struct.unpack_from(">I", data, offset)
        end = offset + 4 + length
        if end > len(data):
            raise ValueError("a string past the end of the key")
        values.append(data[offset + 4:end])
        offset = end
    return values, offset


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
