"""The agent's host key file: its public half read without paramiko, equal to what paramiko reads, and a file that
cannot be read that way left to paramiko's own error."""

from __future__ import annotations

import base64
from pathlib import Path

import paramiko
import pytest

from devsy.agent.guest import hostkey


def test_the_public_line_is_the_one_paramiko_reads(tmp_path: Path) -> None:
    created = hostkey.public_line(str(tmp_path))  # no key yet: made (through paramiko), then reported
    key = paramiko.Ed25519Key(filename=str(tmp_path / hostkey.KEY_FILE))
    assert created == hostkey.public_line(str(tmp_path)) == f"{key.get_name()} {key.get_base64()}"


def _armored(data: bytes) -> bytes:
    return b"-----BEGIN OPENSSH PRIVATE KEY-----\n" + base64.b64encode(data) + b"\n-----END OPENSSH PRIVATE KEY-----\n"


@pytest.mark.parametrize("text", [
    b"",
    b"not a key",
    _armored(b"openssh-key-v1\x00\x00\x00\x00\x04none"),  # cut off inside its header
    _armored(b"openssh-key-v1\x00" + b"\x00\x00\x00\x04none" * 2 + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"),  # 0 keys
    _armored(b"ssh-key-v0\x00"),
], ids=["empty", "text", "truncated", "no-keys", "other-magic"])
def test_a_file_it_cannot_read_is_left_to_paramiko(tmp_path: Path, text: bytes) -> None:
    (tmp_path / hostkey.KEY_FILE).write_bytes(text)
    with pytest.raises((paramiko.SSHException, IndexError)):  # paramiko trips over a file of no keys: IndexError
        hostkey.public_line(str(tmp_path))
