"""The client's address: the peer, or what a trusted proxy in front says the peer was.

Lockouts (approvals.throttling, through AXES_CLIENT_IP_CALLABLE) count failures
against it and the audit chain records it, so both must agree and neither may be
written by the client. By default no proxy is trusted and the address is the TCP
peer (REMOTE_ADDR): X-Forwarded-For is ignored, since whoever reaches the app
directly writes it.

Behind proxies that each append the address they received a request from to
X-Forwarded-For (Caddy's and nginx's `reverse_proxy`/`proxy_add_x_forwarded_for`
do), the chain reads, client first: whatever the client sent, then one address
per proxy, then the peer. It is walked from the right, past each hop that is a
trusted proxy, and the first hop that is not is the client:

- `BATON_TRUSTED_PROXIES` (settings: a tuple of networks) names the proxies by
  address. A request whose peer is not one of them is taken at its peer's word,
  so a client that bypasses the proxy cannot pass for another address.
- `BATON_TRUSTED_PROXY_COUNT` says how many proxies stand in front, the peer
  being the first: the last that many hops are proxies whatever their addresses.
  Use it only where the app cannot be reached except through them (compose: the
  web service publishes no port), since the peer's address is not checked.

django-ipware (which axes would use without AXES_CLIENT_IP_CALLABLE) is not used:
its trusted-proxy options match entries inside X-Forwarded-For, never the peer,
and its fallbacks read other client-written headers (X-Real-IP and a dozen more).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from django.conf import settings
from django.http import HttpRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def client_address(request: HttpRequest) -> str | None:
    """Return the address failures are counted against and the audit records."""
    return address_from(
        peer=request.META.get("REMOTE_ADDR"),
        forwarded_for=request.META.get("HTTP_X_FORWARDED_FOR", ""),
        trusted_proxies=settings.BATON_TRUSTED_PROXIES,
        trusted_proxy_count=settings.BATON_TRUSTED_PROXY_COUNT,
    )


def address_from(
    *,
    peer: str | None,
    forwarded_for: str,
    trusted_proxies: Iterable[Network],
    trusted_proxy_count: int,
) -> str | None:
    """Return the client's address from the peer and X-Forwarded-For, trusting the
    proxies given (see the module's docstring for the rule)."""
    trusted_proxies = tuple(trusted_proxies)
    if peer is None or not (trusted_proxies or trusted_proxy_count):
        return peer
    peer_ip = _parse(peer)
    if peer_ip is None or (trusted_proxies and not _within(peer_ip, trusted_proxies)):
        return peer
    # Several X-Forwarded-For headers reach Django joined by commas, in order.
    forwarded = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    # Walk left from the peer (position 0) while the hop reached is a trusted proxy,
    # which vouches for the hop before it.
    client = peer_ip
    for position, hop in enumerate(reversed(forwarded)):
        if not (position < trusted_proxy_count or _within(client, trusted_proxies)):
            break
        hop_ip = _parse(hop)
        if hop_ip is None:
            # Not an address, so not written by a proxy: the last good hop is the client.
            break
        client = hop_ip
    return str(client)


def _parse(text: str) -> Address | None:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    # An IPv4 client reaching an IPv6 socket arrives as ::ffff:a.b.c.d.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped
    return address


def _within(address: Address, networks: tuple[Network, ...]) -> bool:
    return any(address.version == network.version and address in network for network in networks)
