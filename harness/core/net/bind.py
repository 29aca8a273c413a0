"""Addresses a listening socket of the harness binds (the locust master's ``load.master_bind_host``): IPv4, IPv6 and
host names alike, resolved the way the bind will resolve them.

``*``, ``0.0.0.0`` and ``::`` mean every interface (``::`` over IPv6, and IPv4 too where the host is dual-stack);
local processes reach such a master over the loopback of the same family (:func:`connect_host`).
:func:`bind_problem` is what ``harness plan`` asks before a run: does the name resolve, and can a socket bind it here.
"""

from __future__ import annotations

import socket
from typing import Any

ANY_HOSTS = ("*", "0.0.0.0", "::")


def _addrinfo(host: str, port: int) -> tuple[socket.AddressFamily, tuple[Any, ...]]:
    """The first address a TCP bind of ``host:port`` would use (raises ``OSError``, ``gaierror`` included)."""
    name = None if host in ("*", "") else host
    infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    if host == "*":  # every interface, IPv4 (as locust's "tcp://*:port")
        infos = [i for i in infos if i[0] == socket.AF_INET] or infos
    family, _type, _proto, _name, addr = infos[0]
    return family, tuple(addr)


def free_port(host: str) -> int:
    """A port free on ``host`` now (the kernel's pick; the caller binds it next)."""
    family, addr = _addrinfo(host, 0)
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind(addr)
        port: int = sock.getsockname()[1]
        return port


def connect_host(bind_host: str) -> str:
    """The address a process on this machine connects to, for a socket bound to ``bind_host``."""
    if bind_host in ("*", "0.0.0.0"):
        return "127.0.0.1"
    return "::1" if bind_host == "::" else bind_host


def bind_problem(host: str, port: int | None = None) -> str | None:
    """Why a TCP socket cannot listen on ``host`` (port ``port``, or any free port) on this machine, or None."""
    try:
        family, addr = _addrinfo(host, port or 0)
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"{host!r} does not resolve here ({reason})"
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
    except OSError as exc:
        where = f"{addr[0]} port {port}" if port else str(addr[0])
        return f"cannot listen on {where} ({exc.strerror or exc})"
    return None
