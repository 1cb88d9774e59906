"""Address lists of the settings: which peers are the trusted reverse proxies.

``SIDECAR_TRUSTED_PROXIES`` is a comma-separated list of addresses and networks (CIDR), as
gunicorn's ``forwarded_allow_ips`` takes them. An IPv4-mapped IPv6 peer (``::ffff:10.0.0.1``) is
its IPv4 address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(text: str) -> tuple[Network, ...]:
    """The networks of a comma-separated list (an address is its /32 or /128); raises
    ValueError naming the entry that is neither an address nor a network."""
    networks = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"not an IP address or network (CIDR): {entry!r}") from None
    return tuple(networks)


def canonical(text: str) -> str:
    """The list as gunicorn's ``forwarded_allow_ips`` reads it (each network normalised)."""
    return ",".join(str(n.network_address) if n.num_addresses == 1 else str(n)
                    for n in parse_networks(text))


def contains(networks: Sequence[Network], address: str | None) -> bool:
    """True when ``address`` (a peer's, as the server saw it) is in one of ``networks``."""
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False  # a unix socket's peer, or garbage: not a trusted proxy
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)
