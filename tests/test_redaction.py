"""The streaming redaction filter: masks secrets split anywhere, and never holds a byte that cannot start one."""

from __future__ import annotations

import io
import os

import pytest

from devsy.redaction import MASK, RedactingWriter, Redactor, configured_secrets, redact_error, redact_text

SECRET = b"s3cr3t-token"
MASKED = MASK.encode()  # the filter works on bytes


class HoldsLastByte:
    """The seed regression: a filter that always keeps the last byte back 'in case' it starts a secret."""

    def __init__(self, secrets: list[bytes]) -> None:
        self._inner = Redactor(secrets)
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        out = self._inner.feed(self._held + data)
        out, self._held = out[:-1], out[-1:]
        return out

    def finish(self) -> bytes:
        return self._inner.feed(self._held) + self._inner.finish()


def release_violations(make_filter) -> list[str]:
    """Feed chunks that do not end in the start of a secret: every byte must come out at once (nothing held)."""
    chunks = [b"SSH-2.0-paramiko\r\n", b"\x00\x00\x01\x0c\x0a\x14", b"hello s3cr3t-tokeX", b"\xff" * 3, b"z"]
    violations = []
    flt, sent, received = make_filter([SECRET]), b"", b""
    for chunk in chunks:
        sent += chunk
        received += flt.feed(chunk)
        if received != sent:
            violations.append(f"after {chunk!r}: released {len(received)} of {len(sent)} bytes")
    return violations


def test_regression_a_filter_holding_the_last_byte_is_caught():
    assert release_violations(HoldsLastByte), "the check must fail for a filter that holds the last byte"


def test_regression_this_filter_releases_every_byte_that_cannot_start_a_secret():
    assert release_violations(Redactor) == []


@pytest.mark.parametrize("cut", range(1, len(SECRET)))
def test_a_secret_split_at_any_point_is_masked(cut):
    flt = Redactor([SECRET])
    out = flt.feed(b"a " + SECRET[:cut])
    assert out == b"a "  # only the possible start is held back
    out += flt.feed(SECRET[cut:] + b" b")
    assert out + flt.finish() == b"a " + MASKED + b" b"


def test_a_held_prefix_is_released_as_soon_as_it_cannot_be_a_secret():
    flt = Redactor([SECRET])
    assert flt.feed(b"x s3cr") == b"x "
    assert flt.feed(b"e") == b"s3cre"  # "s3cre" cannot start "s3cr3t-token"
    assert flt.finish() == b""


def test_never_holds_more_than_len_minus_one_bytes():
    flt = Redactor([SECRET])
    data = SECRET[:-1]
    assert flt.feed(data) == b""
    assert len(data) == len(SECRET) - 1
    assert flt.feed(b"!") == data + b"!"


def test_end_of_stream_releases_the_held_tail():
    flt = Redactor([SECRET])
    assert flt.feed(b"ends with s3c") == b"ends with "
    assert flt.finish() == b"s3c"


def test_longest_secret_wins_and_overlaps_are_masked():
    flt = Redactor([b"abcd", b"abcdefgh", b"xyz1"])
    out = flt.feed(b"1abcdefgh2abcd3xyz") + flt.feed(b"1") + flt.finish()
    assert out == b"1" + MASKED + b"2" + MASKED + b"3" + MASKED


def test_without_secrets_bytes_pass_untouched():
    flt = Redactor([])
    data = os.urandom(4096)
    assert flt.feed(data) == data and flt.finish() == b""


def test_configured_secrets_reads_lines_and_skips_short_values(monkeypatch):
    monkeypatch.setenv("DEVSY_REDACT", "first-secret\nab\n\nsecond")
    assert configured_secrets(["from-env-value", "1"]) == [b"from-env-value", b"first-secret", b"second"]


def test_writer_masks_across_writes_and_flushes_on_close():
    target = io.BytesIO()
    writer = RedactingWriter(target, [SECRET])
    for piece in (b"key=s3c", b"r3t-token; tail=s3"):
        writer.write(piece)
    assert target.getvalue() == b"key=" + MASKED + b"; tail="
    writer.close()
    assert target.getvalue() == b"key=" + MASKED + b"; tail=s3"


def test_redact_text_masks_whole_messages(monkeypatch):
    monkeypatch.setenv("DEVSY_REDACT", "hunter22")
    assert redact_text("password hunter22 rejected") == "password *** rejected"


def test_every_layer_masks_with_one_mask_and_one_minimum(monkeypatch):
    """The CLI's error redactor, a provider's request redactor and the MicroSandbox messages agree: `***`, and a
    value shorter than 4 bytes is left alone everywhere (README.md, "Secrets")."""
    from devsy.driver.microsandbox.locate import MsbBinary
    from devsy.driver.microsandbox.msb import MsbClient
    from devsy.errors import DevsyError
    from devsy.runtime.host.launcher import ProviderCommand

    monkeypatch.setenv("DEVSY_REDACT", "hunter22\nabc")
    shown = {
        "cli error": redact_error(DevsyError("login hunter22 abc failed")).message,
        "provider": ProviderCommand("p", args=["--token=hunter22", "abc"]).redactor()("login hunter22 abc failed"),
        "msb": MsbClient(MsbBinary("msb", (0, 7, 11))).describe(["echo", "hunter22", "abc"], ["hunter22", "abc"]),
    }
    assert shown == {"cli error": "login *** abc failed", "provider": "login *** abc failed", "msb": "msb echo *** abc"}


@pytest.fixture
def fresh_registry(monkeypatch):
    """register_secrets is process-wide: each test gets an empty registry, and leaves none behind."""
    from devsy import redaction

    monkeypatch.setattr(redaction, "_registered", set())


def test_registered_values_are_configured_secrets(fresh_registry, monkeypatch):
    from devsy.redaction import register_secrets

    monkeypatch.delenv("DEVSY_REDACT", raising=False)
    register_secrets(["container-env-value", "no"])
    assert configured_secrets() == [b"container-env-value"]


def test_a_secret_added_while_its_start_is_held_is_still_masked():
    flt = Redactor([b"abcdefgh"])
    assert flt.feed(b"x abcd") == b"x "  # held: could start the known secret
    flt.add([b"abcdzzzz"])
    assert flt.feed(b"zzzz y") + flt.finish() == MASKED + b" y"


def test_drain_releases_the_held_tail_and_the_writer_stays_usable():
    target = io.BytesIO()
    writer = RedactingWriter(target, [SECRET])
    writer.write(b"ends with s3c")
    writer.drain()
    assert target.getvalue() == b"ends with s3c"
    writer.write(b" then " + SECRET)
    writer.close()
    assert target.getvalue() == b"ends with s3c then " + MASKED


def test_progress_masks_a_registered_secret_split_across_raw_output(fresh_registry):
    from devsy.progress import Progress
    from devsy.redaction import register_secrets

    stream = io.StringIO()
    progress = Progress(stream)
    register_secrets(["remote-env-secret"])  # after the Progress exists, as when a config is loaded later
    with progress.step("running hook"):
        progress.raw(b"value=remote-env-")
        progress.raw(b"secret done\xc3")  # a UTF-8 character split across chunks survives too
        progress.raw(b"\xa9\n")
        progress.raw(b"tail remote-env-")
    text = stream.getvalue()
    assert "remote-env-secret" not in text and "value=*** done\u00e9\n" in text
    assert "tail remote-env-\ndevsy: running hook: done" in text  # a held tail is released before the step line


def test_engine_messages_do_not_quote_mount_sources_or_dockerfile_lines():
    from devsy.driver.docker.engine import engine_message

    bind = 'invalid mount config for type "bind": bind source path does not exist: /home/me/.secret-dir'
    assert "/home/me" not in engine_message(bind) and "bind source path does not exist" in engine_message(bind)
    parse = "dockerfile parse error line 1: unknown instruction: ROOT:$6$HASH:19000:0:99999:7:::"
    assert engine_message(parse) == "dockerfile parse error line 1: unknown instruction (the line is not repeated)"
    created = "error while creating mount source path '/srv/private/x': mkdir /srv/private: permission denied"
    assert "/srv/private/x" not in engine_message(created)


def test_a_long_secret_costs_memory_linear_in_its_length() -> None:
    """An exec's argv are secrets of its messages, and one may be a long `sh -c` script: a redactor must not keep
    every prefix of it (8 KiB would be ~32 MiB that way, 128 KiB about 8 GB)."""
    import tracemalloc

    secret = "s" * 8192
    tracemalloc.start()
    try:
        redactor = Redactor([secret])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"building a redactor for an 8 KiB secret peaked at {peak >> 20} MiB"
    assert redactor(f"a {secret} b") == f"a {MASK} b"
    assert redactor.feed(f"x {secret[:100]}".encode()) == b"x "  # a possible start of it is still held back
    assert redactor.finish() == secret[:100].encode()
