"""The server list (SPEC.md 11.1) without a network: parsing the addresses
given, discovery from connect_urls, the order of a pass, the not_leader
backoff and the error of a pass in which every server failed."""

from __future__ import annotations

import pytest

from fibril._common import Endpoint
from fibril._requests import Request, not_leader_wait
from fibril._servers import MAX_SERVERS, ServerList, endpoint_url, no_server_error, parse_servers
from fibril.errors import AuthViolationError, ConnectionClosedError


def ep(host: str, port: int, tls: bool = False, user: str | None = None, password: str | None = None, token: str | None = None) -> Endpoint:
    return Endpoint(host, port, tls, user, password, token)


@pytest.mark.parametrize(
    "url, servers, want",
    [
        (None, None, [ep("127.0.0.1", 4222)]),
        ("nats://a:1", None, [ep("a", 1)]),
        ("nats://a:1,tls://u:p@b:2", None, [ep("a", 1), ep("b", 2, True, "u", "p")]),
        (" a:1 , fibril://tok@b ", None, [ep("a", 1), ep("b", 4222, token="tok")]),
        (None, ["a:1", "tls://b:2"], [ep("a", 1), ep("b", 2, True)]),
        (None, "a:1,b:2", [ep("a", 1), ep("b", 2)]),
        (None, ("a:1", "A:1", "a:2"), [ep("a", 1), ep("a", 2)]),  # a host:port is kept once
        ("nats://[::1]:5", None, [ep("::1", 5)]),
    ],
)
def test_parse_servers(url: str | None, servers: object, want: list[Endpoint]) -> None:
    assert parse_servers(url, servers) == want  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "url, servers, words",
    [
        ("a:1", ["b:2"], "not both"),
        (["a:1"], None, "give a list as servers"),
        ("a:1,,b:2", None, "address 2 of 3 is empty"),
        ("a:1,", None, "address 2 of 2 is empty"),
        (None, ["a:1", " "], "empty"),
        (None, [], "no address"),
        ("ftp://a:1", None, "unsupported URL scheme 'ftp'"),
        ("nats://a:1,a:port", None, "bad port"),
        (None, ["a:1", 7], "not a string"),
        (None, [f"h{i}:1" for i in range(MAX_SERVERS + 1)], f"at most {MAX_SERVERS}"),
    ],
)
def test_parse_servers_refuses(url: str | None, servers: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_servers(url, servers)  # type: ignore[arg-type]


def test_learn_takes_scheme_and_credentials_of_the_server_connected_with() -> None:
    like = ep("seed", 4443, True, "u", "p")
    sl = ServerList([ep("other", 1), like])
    added = sl.learn(["seed:4443", "b:4222", "[::1]:7", "b:4222", "OTHER:1"], like)
    assert added == 2
    assert sl.urls() == ["nats://other:1", "tls://seed:4443", "tls://b:4222", "tls://[::1]:7"]
    assert sl[2] == ep("b", 4222, True, "u", "p")
    assert sl[3] == ep("::1", 7, True, "u", "p")


@pytest.mark.parametrize(
    "urls",
    [
        None,
        "a:1",  # not a list
        [""],
        ["nohost"],
        [":4222"],
        ["a:0"],
        ["a:65536"],
        ["a:x"],
        ["nats://a:1"],  # the server sends host:port, nothing else
        ["u@a:1"],
        [7],
    ],
)
def test_learn_skips_malformed_entries(urls: object) -> None:
    sl = ServerList([ep("a", 9)])
    assert sl.learn(urls, sl[0]) == 0
    assert len(sl) == 1


def test_learn_is_bounded_and_can_be_off() -> None:
    seed = ep("seed", 1)
    sl = ServerList([seed])
    assert sl.learn([f"h{i}:1" for i in range(100)], seed) == MAX_SERVERS - 1
    assert len(sl) == MAX_SERVERS
    assert sl.learn(["late:1"], seed) == 0
    off = ServerList([seed], discover=False)
    assert off.learn(["b:2"], seed) == 0 and off.urls() == ["nats://seed:1"]


@pytest.mark.parametrize(
    "last, want",
    [(-1, [0, 1, 2]), (0, [1, 2, 0]), (1, [2, 0, 1]), (2, [0, 1, 2])],
)
def test_pass_after_wraps_around(last: int, want: list[int]) -> None:
    sl = ServerList([ep("a", 1), ep("b", 2), ep("c", 3)])
    assert list(sl.pass_after(last)) == want


def test_pass_includes_servers_learnt_during_it() -> None:
    sl = ServerList([ep("a", 1), ep("b", 2)])
    seen = []
    for i in sl.pass_after(0):
        seen.append(i)
        if i == 1:
            sl.learn(["c:3"], sl[1])  # INFO of b named c, then b failed its handshake
    assert seen == [1, 2, 0]


def test_endpoint_url_hides_credentials() -> None:
    assert endpoint_url(ep("h", 1, True, "u", "secret")) == "tls://h:1"
    assert endpoint_url(ep("h", 2, token="tok")) == "nats://h:2"


def test_no_server_error() -> None:
    refusal = AuthViolationError("authorization violation")
    assert no_server_error([("nats://a:1", refusal)]) is refusal
    err = no_server_error([("nats://a:1", ConnectionClosedError("refused")), ("nats://b:2", refusal)])
    assert isinstance(err, ConnectionClosedError) and err.retriable
    assert "nats://a:1: connection_closed: refused" in str(err)
    assert "nats://b:2: auth_violation" in str(err)


def test_not_leader_wait_doubles_to_a_second_within_the_timeout() -> None:
    r = Request(b"PUB x 0\r\n\r\n", None)
    now, waits = 0.0, []
    while (w := not_leader_wait(r, now, 5.0)) is not None:
        waits.append(round(w, 6))
        now += w
    assert waits[:7] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert abs(sum(waits) - 5.0) < 1e-9  # the last wait is cut to the deadline
    assert not_leader_wait(Request(b"", None), 0.0, 0.0) is None  # 0: never resent
