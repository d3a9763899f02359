"""The client's list of servers (SPEC.md 11.1): the addresses it was given,
then those INFO's ``connect_urls`` taught it, and the order it tries them in.

Nothing here does I/O or keeps time: the client asks for a pass over the
list and tries each address itself. The list never holds more than
:data:`MAX_SERVERS` entries, nor the same host and port twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

from ._common import Endpoint, parse_url
from ._errbase import FibrilError
from .errors import ConnectionClosedError

#: Most addresses a client keeps, given and discovered together (SPEC.md 11.1).
MAX_SERVERS = 64


def endpoint_url(ep: Endpoint) -> str:
    """Returns ``ep`` as a URL without its credentials (``nats://host:port``,
    ``tls://host:port``), for messages and :attr:`fibril.Client.servers`."""
    host = f"[{ep.host}]" if ":" in ep.host else ep.host
    return f"{'tls' if ep.tls else 'nats'}://{host}:{ep.port}"


def parse_servers(url: str | None, servers: Iterable[str] | str | None) -> list[Endpoint]:
    """Parses the addresses given to ``connect``: ``url`` (one URL or several,
    comma-separated) or ``servers`` (a list of URLs, or one comma-separated
    string); ``nats://127.0.0.1:4222`` when neither is given. Each entry keeps
    the rules of a single URL (scheme, ``tls://``, credentials); a repeated
    host and port is kept once, at its first place.

    Raises:
        ValueError: Both ``url`` and ``servers`` are given, an entry is empty
            or not a valid URL, or there are more than :data:`MAX_SERVERS`.
    """
    if url is not None and servers is not None:
        raise ValueError("give url or servers, not both")
    if url is not None and not isinstance(url, str):
        raise ValueError(f"url must be a string, got {type(url).__name__}; give a list as servers=[...]")
    if servers is None:
        raw: list[str] = (url if url is not None else "nats://127.0.0.1:4222").split(",")
    elif isinstance(servers, str):
        raw = servers.split(",")
    else:
        raw = []
        for s in servers:
            if not isinstance(s, str):
                raise ValueError(f"server address {s!r} is not a string")
            raw.append(s)
    if not raw:
        raise ValueError("servers: no address given")
    out: list[Endpoint] = []
    seen: set[tuple[str, int]] = set()
    for i, entry in enumerate(raw):
        entry = entry.strip()
        if not entry:
            raise ValueError(f"server address {i + 1} of {len(raw)} is empty")
        try:
            ep = parse_url(entry)
        except ValueError as e:
            raise ValueError(f"server address {entry!r}: {e}") from None
        key = (ep.host.lower(), ep.port)
        if key not in seen:
            seen.add(key)
            out.append(ep)
    if len(out) > MAX_SERVERS:
        raise ValueError(f"servers: at most {MAX_SERVERS} addresses, got {len(out)}")
    return out


def _host_port(entry: str) -> tuple[str, int] | None:
    """Splits a ``connect_urls`` entry (``host:port`` or ``[v6]:port``); None
    when it is not one."""
    host, sep, port = entry.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or any(c in host for c in "/@ \t[]"):
        return None
    return host, int(port)


class ServerList:
    """The addresses a client may connect to, in the order it tries them.

    Args:
        endpoints: The given addresses (from :func:`parse_servers`).
        discover: Add the ``connect_urls`` of each INFO (:meth:`learn`).
    """

    def __init__(self, endpoints: list[Endpoint], *, discover: bool = True) -> None:
        if not endpoints:
            raise ValueError("servers: no address given")
        self._eps = list(endpoints[:MAX_SERVERS])
        self._keys = {(e.host.lower(), e.port) for e in self._eps}
        self.discover = discover

    def __len__(self) -> int:
        return len(self._eps)

    def __getitem__(self, i: int) -> Endpoint:
        return self._eps[i]

    def urls(self) -> list[str]:
        """Returns every address as a URL without credentials, in list order."""
        return [endpoint_url(e) for e in self._eps]

    def learn(self, connect_urls: object, like: Endpoint) -> int:
        """Appends the ``host:port`` entries of an INFO's ``connect_urls`` not
        yet in the list, up to :data:`MAX_SERVERS` in all; each takes the
        scheme, TLS and credentials of ``like`` (the address connected with).
        Malformed entries are skipped: they are the server's data, not the
        caller's. Does nothing when discovery is off.

        Returns:
            How many addresses were added.
        """
        if not self.discover or not isinstance(connect_urls, list):
            return 0
        added = 0
        for entry in connect_urls:
            if len(self._eps) >= MAX_SERVERS:
                break
            hp = _host_port(entry) if isinstance(entry, str) else None
            if hp is None:
                continue
            key = (hp[0].lower(), hp[1])
            if key in self._keys:
                continue
            self._keys.add(key)
            self._eps.append(replace(like, host=hp[0], port=hp[1]))
            added += 1
        return added

    def pass_after(self, last: int) -> Iterator[int]:
        """Yields the indexes of one pass over the list: those after ``last``
        to the end (entries learnt meanwhile included), then from the start
        through ``last`` (wrapping around). ``last=-1`` is the first connect:
        every entry from the start."""
        i = last + 1
        while i < len(self._eps):
            yield i
            i += 1
        yield from range(0, min(last + 1, len(self._eps)))


def refused_for_good(e: FibrilError) -> bool:
    """Reports whether a connect attempt failed in a way retrying cannot mend
    (credentials, TLS trust, not a Fibril server)."""
    return not e.retriable and not isinstance(e, ConnectionClosedError)


def no_server_error(tried: list[tuple[str, FibrilError]]) -> FibrilError:
    """Returns the error of a pass over the servers in which every attempt
    failed: the one error when one address was tried, else a
    ConnectionClosedError naming each address and what went wrong there."""
    if len(tried) == 1:
        return tried[0][1]
    return ConnectionClosedError(
        "no server completed the handshake: " + "; ".join(f"{url}: {e}" for url, e in tried)
    )
