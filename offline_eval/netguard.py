"""The connection allow-list: once a config names servers, this process opens network connections to their
hosts and to nothing else (an audit hook on every Python-level socket connect; local Unix sockets pass).

A process-wide audit hook cannot be removed, so it is installed once and reads a set that later configs
extend. Name resolution happens here, once, for the configured hosts only.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

_ALLOWED: set[str] = set()
_installed = False


class ConnectionNotAllowed(ConnectionRefusedError):
    """A connection to a host that no base_url in the config names."""


def host_of(url: str) -> tuple[str, int]:
    u = urlsplit(url)
    if not u.hostname:
        raise ValueError(f"no host in {url!r}")
    return u.hostname, u.port or (443 if u.scheme == "https" else 80)


def allow_only(urls: Iterable[str]) -> None:
    """Allow connections to these URLs' hosts (every address they resolve to), and refuse all others."""
    global _installed
    for url in urls:
        host, port = host_of(url)
        _ALLOWED.add(host)
        try:
            _ALLOWED.update(str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError:
            pass  # an unknown name: connecting to it fails later with the server's URL in the message
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event != "socket.connect":
        return
    sock, address = args
    if getattr(socket, "AF_UNIX", None) is not None and sock.family == socket.AF_UNIX:
        return
    host = address[0] if isinstance(address, tuple) else str(address)
    if host not in _ALLOWED:
        raise ConnectionNotAllowed(
            f"offline-eval refused a connection to {host}: only the config's base_url hosts "
            f"({', '.join(sorted(_ALLOWED))}) may be reached"
        )
