"""The host side: launch a provider under the supervisor, complete the handshake, call it with typed requests.

Importing this package is cheap (no grpc): the supervisor runs as `python -m devsy.runtime.host.supervisor`.
"""
