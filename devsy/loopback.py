"""Whether a host name or address is this machine: what devsy speaks to over plain HTTP (a registry, a tarball)."""

from __future__ import annotations

import ipaddress


def is_loopback_host(host: str | None) -> bool:
    """`localhost`, 127.0.0.0/8 or ::1 (an address in brackets too); anything else, or nothing, is not."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
