"""Protocol constants both sides agree on: the go-plugin handshake and the API version this code speaks."""

from __future__ import annotations

# go-plugin handshake: the magic cookie is identity (this executable is a devsy runtime provider), not security.
COOKIE_KEY = "DEVSY_RUNTIME_PLUGIN"
COOKIE_VALUE = "devsy-runtime-v1"
ENV_PROTOCOL_VERSIONS = "PLUGIN_PROTOCOL_VERSIONS"
ENV_SOCKET_DIR = "PLUGIN_UNIX_SOCKET_DIR"
ENV_CLIENT_CERT = "PLUGIN_CLIENT_CERT"
# Every variable the transport owns: user env may not set them (the supervisor drops them, then appends its own).
TRANSPORT_PREFIXES = ("PLUGIN_",)
TRANSPORT_KEYS = (COOKIE_KEY,)

CORE_PROTOCOL_VERSION = 1  # go-plugin's own handshake format
APP_PROTOCOL_VERSION = 1  # Runtime Protocol major version, negotiated through PLUGIN_PROTOCOL_VERSIONS
# The subcommand devsy's own providers declare in their provider rows: their convention, not the protocol's (a
# go-plugin provider takes whatever arguments its definition declares, often none).
SERVE_ARG = "serve"
HEALTH_SERVICE = "plugin"

API_MAJOR = 1
API_MINOR = 3

MAX_FRAME = 32768  # largest Exec/Logs data frame, both directions

# What go-plugin prints when the cookie is missing or wrong; hosts recognise it in a provider's stderr. go-plugin
# wraps it over three lines (server.go), devsy's SDK prints it on one: compare with whitespace collapsed.
NOT_A_PLUGIN_MESSAGE = (
    "This binary is a plugin. These are not meant to be executed directly. Please execute the program that "
    "consumes these plugins, which will load any plugins automatically"
)


def is_not_a_plugin_refusal(text: str) -> bool:
    """Whether `text` (a provider's stderr) holds go-plugin's cookie refusal, however its lines are wrapped."""
    return " ".join(NOT_A_PLUGIN_MESSAGE.split()) in " ".join(text.split())


def is_transport_key(key: str) -> bool:
    return key in TRANSPORT_KEYS or key.startswith(TRANSPORT_PREFIXES)
