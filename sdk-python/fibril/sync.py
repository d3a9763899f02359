"""A small blocking Fibril client for scripts and threads-based code.

It drives the same sans-I/O core as the asyncio client (one parser), one request
at a time, without reconnect or push subscriptions: publish, fetch, settle and
manage. For throughput, pipelining and push consumption use :mod:`fibril`.

Example::

    from fibril.sync import connect

    with connect("nats://127.0.0.1:4222") as c:
        c.publish("jobs", b"work")
        for msg in c.fetch("jobs", "workers", 10, wait=1.0):
            msg.ack()

A ``Client`` is not thread-safe; give each thread its own.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import _proto as proto
from ._common import (
    CLIENT_MAX_LINE,
    PAYLOAD_SLACK,
    Data,
    HeadersArg,
    MsgFields,
    Position,
    ack_frames,
    connect_options,
    group_config,
    json_answer,
    max_control_line,
    msg_fields,
    parse_url,
    poll_frame,
    position_from,
    publish_frame,
    tls_context,
    to_ms,
    topic_config,
)
from ._errbase import FibrilError
from .errors import (
    ClientClosedError,
    ConnectionClosedError,
    NotAckableError,
    ProtocolError,
    TLSError,
    error_from_wire,
)


@dataclass(frozen=True, slots=True)
class Msg(MsgFields):
    """A message delivered by :meth:`Client.fetch`; settle it with one blocking call."""

    _client: Client | None = field(default=None, repr=False, compare=False)

    @property
    def delivery_count(self) -> int:
        """How many times this message has been delivered (1 on the first delivery)."""
        return self.handle.attempt if self.handle is not None else 1

    def _h(self) -> tuple[Client, str]:
        if self.handle is None or self._client is None:
            raise NotAckableError(f"message on {self.subject!r} has no ack handle")
        return self._client, str(self.handle)

    def ack(self) -> None:
        """Acknowledges the message. Raises FibrilError when the server refuses."""
        c, h = self._h()
        c._call(proto.encode_ack([h]))

    def nack(self, *, delay: float | None = None) -> None:
        """Asks for redelivery after ``delay`` seconds (None = at once)."""
        c, h = self._h()
        c._call(proto.encode_nack(h, to_ms(delay, "delay")))

    def reject(self) -> None:
        """Dead-letters the message."""
        c, h = self._h()
        c._call(proto.encode_reject(h))

    def in_progress(self, *, extend: float | None = None) -> None:
        """Extends the lease (by ``extend`` seconds, None = the group's lease)."""
        c, h = self._h()
        c._call(proto.encode_extend(h, to_ms(extend, "extend")))


class Client:
    """A blocking connection in Fibril mode. Create it with :func:`connect`."""

    def __init__(self, sock: socket.socket, parser: proto.Parser, info: dict[str, Any], crc: bool, timeout: float):
        self._sock = sock
        self._parser = parser
        self._info = info
        self._crc = crc
        self._timeout = timeout
        self._events: list[proto.Event] = []
        self._closed = False
        self._max_payload = int(info.get("max_payload") or proto.DEFAULT_MAX_PAYLOAD)

    @property
    def server_info(self) -> dict[str, Any]:
        """The INFO fields of the server (a copy)."""
        return dict(self._info)

    def close(self) -> None:
        """Closes the connection. Idempotent."""
        if not self._closed:
            self._closed = True
            try:
                self._sock.close()
            except OSError:
                pass

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------

    def _next_event(self) -> proto.Event:
        while not self._events:
            try:
                data = self._sock.recv(65536)
            except TimeoutError:
                self.close()
                raise ConnectionClosedError("timed out waiting for the server") from None
            except OSError as e:
                self.close()
                raise ConnectionClosedError(str(e)) from e
            if not data:
                self.close()
                raise ConnectionClosedError("connection closed by server")
            try:
                self._events.extend(self._parser.feed(data))
            except ProtocolError:
                self.close()
                raise
        return self._events.pop(0)

    def _call(self, frame: bytes, *, poll: bool = False) -> Any:
        """Sends one command and returns its answer (the +OK argument, or frames for POLL)."""
        if self._closed:
            raise ClientClosedError("client closed")
        try:
            self._sock.sendall(frame)
        except OSError as e:
            self.close()
            raise ConnectionClosedError(str(e)) from e
        return self._answer(poll)

    def _answer(self, poll: bool = False) -> Any:
        msgs: list[proto.Msg] = []
        while True:
            ev = self._next_event()
            if isinstance(ev, proto.Ok):
                if poll:
                    if ev.arg != str(len(msgs)):
                        raise ProtocolError(f"POLL answered +OK {ev.arg!r} after {len(msgs)} messages")
                    return msgs
                return ev.arg
            if isinstance(ev, proto.Err):
                err = error_from_wire(ev)
                if err.fatal:
                    self.close()
                raise err
            if isinstance(ev, proto.Pong):
                return None
            if isinstance(ev, proto.Ping):
                self._sock.sendall(proto.PONG)
            elif isinstance(ev, proto.Info):
                self._info.update(ev.fields)
            elif isinstance(ev, proto.Msg) and poll and ev.sid == "0":
                msgs.append(ev)
            elif isinstance(ev, proto.ParseError) and ev.frame is not None and poll and ev.frame.sid == "0":
                msgs.append(ev.frame)  # failed its CRC check: refused (and handed back) by fetch

    def ping(self) -> None:
        """Round-trips a PING."""
        self._call(proto.PING)

    def publish(
        self,
        subject: str,
        data: Data,
        *,
        key: str | bytes | None = None,
        headers: HeadersArg = None,
        msg_id: str | None = None,
    ) -> Position | None:
        """Publishes one message and waits for its confirm.

        Returns:
            Where it was stored, or None when no durable topic captured it.

        Raises:
            ValueError: Bad subject/headers or oversized message.
            FibrilError: The server refused it.
        """
        frame = publish_frame(
            subject, data, key=key, headers=headers, msg_id=msg_id, crc=self._crc, max_payload=self._max_payload
        )
        return position_from(self._call(frame))

    def fetch(self, topic: str, group: str, max_messages: int = 1, wait: float = 0.0) -> list[Msg]:
        """Pulls up to ``max_messages`` ready messages, waiting up to ``wait`` seconds for the first.

        Raises:
            CorruptMessageError: A delivery failed its CRC check (the batch is
                handed back with NACK, none is returned).
            FibrilError: The server refused.
        """
        frames: list[proto.Msg] = self._call(poll_frame(topic, group, max_messages, wait), poll=True)
        out: list[Msg] = []
        try:
            for fr in frames:
                f = msg_fields(fr)
                out.append(Msg(f.subject, f.data, f.headers, f.header_pairs, f.reply, f.handle, f.crc, self))
        except FibrilError:
            for fr in frames:
                h = proto.parse_handle(fr.reply or "")
                if h is not None:
                    self._call(proto.encode_nack(str(h)))
            raise
        return out

    def ack(self, msgs: Iterable[Msg]) -> None:
        """Acknowledges many messages (one ACK line per control-line's worth of handles)."""
        handles = [m._h()[1] for m in msgs]
        for frame in ack_frames(handles, max_control_line(self._info)):
            self._call(frame)

    def create_topic(self, name: str, **config: Any) -> Any:
        """Creates a durable topic; ``config`` as in :meth:`fibril.Client.create_topic`."""
        proto.validate_subject(name)
        return json_answer(self._call(proto.encode_manage("TOPIC", "CREATE", name, config=topic_config(**config))))

    def topic_info(self, name: str) -> Any:
        """Returns the JSON info of a topic."""
        return json_answer(self._call(proto.encode_manage("TOPIC", "INFO", name)))

    def list_topics(self) -> Any:
        """Returns the JSON list of topics."""
        return json_answer(self._call(proto.encode_manage("TOPIC", "LIST")))

    def delete_topic(self, name: str) -> Any:
        """Deletes a topic."""
        return json_answer(self._call(proto.encode_manage("TOPIC", "DELETE", name)))

    def create_group(self, topic: str, group: str, **config: Any) -> Any:
        """Creates a consumer group; ``config`` as in :meth:`fibril.Client.create_group`."""
        return json_answer(
            self._call(proto.encode_manage("GROUP", "CREATE", topic, group, config=group_config(**config)))
        )

    def group_info(self, topic: str, group: str) -> Any:
        """Returns the JSON info of a group."""
        return json_answer(self._call(proto.encode_manage("GROUP", "INFO", topic, group)))

    def delete_group(self, topic: str, group: str) -> Any:
        """Deletes a consumer group."""
        return json_answer(self._call(proto.encode_manage("GROUP", "DELETE", topic, group)))


def connect(
    url: str = "nats://127.0.0.1:4222",
    *,
    name: str | None = None,
    token: str | None = None,
    user: str | None = None,
    password: str | None = None,
    tls: bool | ssl.SSLContext | None = None,
    crc: bool = True,
    timeout: float = 30.0,
) -> Client:
    """Connects and performs the Fibril handshake; returns a blocking :class:`Client`.

    Args:
        url: As for :func:`fibril.connect`.
        timeout: Seconds any single socket operation may block.

    Raises:
        ConnectionClosedError: The server cannot be reached.
        FibrilError: The server refused the CONNECT.
    """
    ep = parse_url(url)
    try:
        sock = socket.create_connection((ep.host, ep.port), timeout=timeout)
    except OSError as e:
        raise ConnectionClosedError(f"connect to {ep.host}:{ep.port}: {e}") from e
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    parser = proto.Parser(max_control_line=CLIENT_MAX_LINE, max_json_line=CLIENT_MAX_LINE)
    c = Client(sock, parser, {}, crc, timeout)
    try:
        ev = c._next_event()
        if not isinstance(ev, proto.Info):
            raise ProtocolError("server did not start with INFO")
        c._info = dict(ev.fields)
        c._max_payload = int(c._info.get("max_payload") or proto.DEFAULT_MAX_PAYLOAD)
        parser.max_payload = c._max_payload + PAYLOAD_SLACK
        if not c._info.get("fibril"):
            raise ProtocolError("the server does not speak the Fibril protocol (no fibril in INFO)")
        ctx = tls_context(tls, ep)
        if ctx is None and c._info.get("tls_required"):
            ctx = ssl.create_default_context()
        if ctx is not None:
            try:
                c._sock = ctx.wrap_socket(sock, server_hostname=ep.host)
            except ssl.SSLError as e:
                raise TLSError(f"TLS with {ep.host}:{ep.port}: {e}") from e
        opts = connect_options(
            name=name, token=token, user=user, password=password, crc=crc, tls=ctx is not None, endpoint=ep
        )
        parser.crc = crc
        c._call(proto.encode_connect(opts))
    except BaseException:
        c.close()
        raise
    return c
