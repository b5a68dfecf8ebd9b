"""The connection allow-list: while a sweep whose config names servers runs, this process opens network
connections to their hosts and to nothing else (an audit hook on every Python-level socket connect; local Unix
sockets pass). When the sweep ends, the process connects as it did before (a notebook goes on working).

A process-wide audit hook cannot be removed, so it is installed once and reads the allow-lists of the sweeps
running now; with none, it allows everything. Name resolution happens here, once, for the configured hosts only.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

_ACTIVE: list[set[str]] = []  # one allow-list per sweep running now (threads of a notebook may run several)
_LOCK = threading.Lock()
_installed = False


class ConnectionNotAllowed(ConnectionRefusedError):
    """A connection to a host that no base_url in the config names."""


def host_of(url: str) -> tuple[str, int]:
    u = urlsplit(url)
    if not u.hostname:
        raise ValueError(f"no host in {url!r}")
    return u.hostname, u.port or (443 if u.scheme == "https" else 80)


@contextmanager
def allow_only(urls: Iterable[str]) -> Iterator[None]:
    """Within the block, allow connections to these URLs' hosts (every address they resolve to), and refuse all
    others."""
    global _installed
    allowed: set[str] = set()
    for url in urls:
        host, port = host_of(url)
        allowed.add(host)
        try:
            allowed.update(str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError:
            pass  # an unknown name: connecting to it fails later with the server's URL in the message
    with _LOCK:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
        _ACTIVE.append(allowed)
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE.remove(allowed)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event != "socket.connect":
        return
    sock, address = args
    if getattr(socket, "AF_UNIX", None) is not None and sock.family == socket.AF_UNIX:
        return
    active = list(_ACTIVE)
    if not active:
        return
    allowed = set().union(*active)
    host = address[0] if isinstance(address, tuple) else str(address)
    if host not in allowed:
        raise ConnectionNotAllowed(
            f"offline-eval refused a connection to {host}: only the config's base_url hosts "
            f"({', '.join(sorted(allowed))}) may be reached"
        )
