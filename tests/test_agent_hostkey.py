"""The agent's host key file: its public half read without paramiko, equal to what paramiko reads, and any file that
cannot be read that way left to paramiko (which the agent's SSH server loads it with)."""

from __future__ import annotations

import base64
from pathlib import Path

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from devsy.agent.guest import hostkey

ARMOR = (b"-----BEGIN OPENSSH PRIVATE KEY-----\n", b"\n-----END OPENSSH PRIVATE KEY-----\n")


def _openssh(key, encryption=serialization.NoEncryption()) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, encryption)


def _body(text: bytes) -> bytes:
    return base64.b64decode(b"".join(text.strip().splitlines()[1:-1]))


def _armored(data: bytes) -> bytes:
    return ARMOR[0] + base64.b64encode(data) + ARMOR[1]


def _as_paramiko_reads_it(state_dir: Path) -> str | type[BaseException]:
    try:
        key = paramiko.Ed25519Key(filename=str(state_dir / hostkey.KEY_FILE))
    except Exception as exc:  # noqa: BLE001 - whatever paramiko raises is the expected outcome
        return type(exc)
    return f"{key.get_name()} {key.get_base64()}"


def _as_public_line_reads_it(state_dir: Path) -> str | type[BaseException]:
    try:
        return hostkey.public_line(str(state_dir))
    except Exception as exc:  # noqa: BLE001
        return type(exc)


def test_the_public_line_is_the_one_paramiko_reads(tmp_path: Path) -> None:
    created = hostkey.public_line(str(tmp_path))  # no key yet: made (through paramiko), then reported
    assert created == hostkey.public_line(str(tmp_path)) == _as_paramiko_reads_it(tmp_path)
    assert created.startswith("ssh-ed25519 ")


def _files() -> dict[str, bytes]:
    good = _openssh(ed25519.Ed25519PrivateKey.generate())
    other = _body(_openssh(ed25519.Ed25519PrivateKey.generate()))
    body = _body(good)
    public = slice(62, 94)  # the public key in the public blob: after the magic, 3 strings, the count, 2 lengths
    files = {
        "empty": b"",
        "text": b"not a key",
        "rsa": _openssh(rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        "ecdsa": _openssh(ec.generate_private_key(ec.SECP256R1())),
        "encrypted": _openssh(ed25519.Ed25519PrivateKey.generate(),
                              serialization.BestAvailableEncryption(b"secret")),
        "swapped-public": _armored(body[:public.start] + other[public] + body[public.stop:]),
        "bit-flip-in-cipher": _armored(body.replace(b"none", b"nonf", 1)),
    }
    for cut in range(len(hostkey._MAGIC), len(body), 7):
        files[f"cut-{cut}"] = _armored(body[:cut])
    return files


FILES = _files()


@pytest.mark.parametrize("name", sorted(FILES))
def test_any_file_reads_as_paramiko_reads_it(tmp_path: Path, name: str) -> None:
    """Never a line where the SSH server would fail to load the key: the line paramiko gives, or its error."""
    (tmp_path / hostkey.KEY_FILE).write_bytes(FILES[name])
    expected = _as_paramiko_reads_it(tmp_path)
    assert not isinstance(expected, str), "every file here is one paramiko refuses"
    assert _as_public_line_reads_it(tmp_path) == expected
