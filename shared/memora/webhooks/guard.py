"""Which webhook targets may be called: a guard against server-side request forgery.

A URL must be http(s) with a host. Every address its host resolves to must be public (global
in Python's `ipaddress`, and not multicast): not private, loopback, link-local (where cloud
metadata services live), shared (carrier-grade NAT), reserved or unspecified, IPv4 addresses
mapped into IPv6 included, unless the operator allows private targets
(MEMORA_WEBHOOK_ALLOW_PRIVATE). It is checked at registration and again at every
attempt, and the attempt connects to the very address that was checked (a name that resolves
to a public address when checked and to a private one when called gets nowhere).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnsafeTarget(Exception):
    """The URL may not be called; the message says why."""


def is_public(address: IPAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    # not global: private, loopback, link-local, shared (100.64/10), reserved, unspecified...
    return address.is_global and not address.is_multicast


def split(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL; UnsafeTarget for anything else."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeTarget(f"not a valid URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UnsafeTarget("the URL must be http:// or https:// with a host")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def resolve(url: str, *, allow_private: bool) -> IPAddress:
    """The address to connect to for `url`: its host's first address, after checking that
    every address the host resolves to may be called."""
    _, host, port = split(url)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise UnsafeTarget(f"the host {host!r} does not resolve: {exc}") from exc
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    if not addresses:
        raise UnsafeTarget(f"the host {host!r} does not resolve")
    refused = [str(a) for a in addresses if not is_public(a)]
    if refused and not allow_private:
        raise UnsafeTarget(
            f"the host {host!r} resolves to a private, loopback, link-local or reserved "
            f"address ({', '.join(sorted(set(refused)))}); set MEMORA_WEBHOOK_ALLOW_PRIVATE=true "
            "to allow such targets"
        )
    return addresses[0]
