"""Where web_fetch may connect: the addresses a name resolves to, checked before the connection
and used for it, so a name cannot resolve to a public address for the check and a private one for
the connection (DNS rebinding).

Refused unless the policy allows private addresses: loopback (127.0.0.0/8, ::1), private
(10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16 with the cloud metadata service
169.254.169.254, fe80::/10), unspecified (0.0.0.0, ::), shared (100.64/10), multicast and the other
reserved ranges: whatever is not a global unicast address, an IPv4 address inside IPv6 included.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from agentrun.activities.tools.base import Refused, ToolFailed

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def is_public(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
        if inner is not None:
            return is_public(inner)
    return address.is_global and not address.is_multicast


async def resolve(host: str, port: int, *, allow_private: bool) -> list[str]:
    """The addresses to connect to for host, in the resolver's order: every address the name has
    must be allowed (one private among public ones would let a second lookup pick it)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ToolFailed(f"cannot resolve {host}: {e.strerror}") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    if not addresses:
        raise ToolFailed(f"cannot resolve {host}")
    if not allow_private:
        for address in addresses:
            if not is_public(address):
                raise Refused(
                    f"{host} resolves to {address}, a loopback, private, link-local or reserved address; "
                    "web_fetch reaches public addresses only"
                )
    return list(dict.fromkeys(str(address) for address in addresses))
