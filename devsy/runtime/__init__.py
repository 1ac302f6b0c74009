"""Runtime Protocol v1 (shared/PROTOCOL.md): bindings, go-plugin transport, supervisor, provider SDK, host client.

Importing this package is cheap (no grpc): the supervisor imports from it on every provider launch.
"""
