"""The wire both sides share: protocol constants, the handshake line, typed errors, status details, conversions.

The generated bindings live beside this package (`devsy.runtime.v1`, `devsy.runtime.goplugin`), at the paths their
.proto files name.
"""
