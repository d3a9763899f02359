"""Token auth and server limits against a real ``fibril serve --token``."""

from __future__ import annotations

import asyncio
import json
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Server, kill_server, start_server, stop_server
from helpers import Proxy, run, unique

import fibril
from fibril import sync
from fibril.errors import AuthViolationError


@pytest.fixture(scope="module")
def token_server(fibril_bin: Path) -> Iterator[Server]:
    with tempfile.TemporaryDirectory(prefix="fibril-auth-") as d:
        s = start_server(fibril_bin, d, "--token", "s3cret", "--max-payload", "4096")
        try:
            yield s
        finally:
            stop_server(s)


def test_token_accepted(token_server: Server) -> None:
    async def body() -> None:
        async with fibril.connect(token_server.url, token="s3cret") as c:
            assert c.server_info.get("auth_required") is True
            await c.ping()
        # The token may also ride in the URL.
        async with fibril.connect(f"nats://s3cret@{token_server.addr}") as c:
            await c.ping()

    run(body())
    with sync.connect(token_server.url, token="s3cret") as sc:
        sc.ping()


@pytest.mark.parametrize("token", [None, "wrong"])
def test_bad_token_is_refused_and_not_retried(token_server: Server, token: str | None) -> None:
    async def body() -> None:
        with pytest.raises(AuthViolationError) as ei:
            await fibril.connect(token_server.url, token=token)
        assert ei.value.fatal and not ei.value.retriable

    run(body())
    with pytest.raises(AuthViolationError):
        sync.connect(token_server.url, token=token)


def test_max_payload_checked_before_sending(token_server: Server) -> None:
    async def body() -> None:
        async with fibril.connect(token_server.url, token="s3cret") as c:
            assert c.server_info["max_payload"] == 4096
            subject = "_INBOX." + unique("big")
            assert await c.publish(subject, b"x" * 4000) is None
            with pytest.raises(ValueError, match="max_payload"):
                await c.publish(subject, b"x" * 4097)
            await c.ping()  # the connection is still fine: nothing was sent

    run(body())


# bcrypt (cost 4, the minimum, to keep the tests fast) of "right-pw" and of
# "other-pw", made with golang.org/x/crypto/bcrypt.
RIGHT = "$2a$04$OBEprpv7bW9jM5txNDGR/ut93/1wRwe9KY/8QT/uc0S7Kq2CIenvq"
OTHER = "$2a$04$N.NP2osD48ZlAC7VWSZFKOrr52LJ6awQma0NJSuwCxWNdorFspp9i"
FAST = fibril.Reconnect(initial=0.01, max_delay=0.02)


def user_config(directory: str, bcrypt_hash: str) -> str:
    """Writes a ``fibril serve --config`` file with one user ``app``."""
    path = Path(directory) / f"fibril-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"users": [{"name": "app", "password_bcrypt": bcrypt_hash}]}))
    return str(path)


@pytest.fixture(scope="module")
def user_server(fibril_bin: Path) -> Iterator[Server]:
    with tempfile.TemporaryDirectory(prefix="fibril-users-") as d:
        s = start_server(fibril_bin, d, "--config", user_config(d, RIGHT))
        try:
            yield s
        finally:
            stop_server(s)


def test_user_password_accepted_and_publishes(user_server: Server) -> None:
    topic = unique("auth")

    async def body() -> None:
        async with fibril.connect(user_server.url, user="app", password="right-pw") as c:
            assert c.server_info.get("auth_required") is True
            await c.create_topic(topic)
            pos = await c.publish(topic, b"one")
            assert pos is not None, "a durable publish is confirmed with a position"
            msgs = await c.fetch(topic, "billing", 1, wait=1.0)
            assert [m.data for m in msgs] == [b"one"]
            await c.ack(msgs)
        # user and password in the URL
        async with fibril.connect(f"nats://app:right-pw@{user_server.addr}") as c:
            await c.ping()

    run(body())
    with sync.connect(user_server.url, user="app", password="right-pw") as sc:
        sc.ping()


@pytest.mark.parametrize(("user", "password"), [("app", "wrong"), ("nobody", "right-pw"), (None, None)])
def test_wrong_password_is_refused_once(user_server: Server, user: str | None, password: str | None) -> None:
    # Every refusal is auth_violation, an unknown user's too (its bcrypt run
    # no longer races the auth timer into auth_timeout).

    async def body() -> None:
        proxy = await Proxy(user_server.host, user_server.port).start()
        try:
            with pytest.raises(AuthViolationError) as ei:
                await fibril.connect(proxy.url, user=user, password=password, reconnect=FAST)
            assert ei.value.fatal
            assert ei.value.code == "auth_violation" and not ei.value.retriable
            # One dial and none after it. The quiet period is the check
            # (nothing may happen in it); with 10 ms backoff a retry loop
            # would dial many times in it.
            await asyncio.sleep(0.3)
            assert proxy.accepted == 1
        finally:
            await proxy.close()

    run(body())
    with pytest.raises(AuthViolationError) as sei:
        sync.connect(user_server.url, user=user, password=password)
    assert sei.value.code == "auth_violation"


@pytest.mark.parametrize("kind", ["token", "user"])
def test_reconnect_gives_up_on_a_refused_login(fibril_bin: Path, kind: str) -> None:
    """The server comes back on the same address with other credentials: the
    client's first reconnect is refused, and it stops (closed with the typed
    error) instead of retrying forever."""

    def args(d: str, good: bool) -> list[str]:
        if kind == "token":
            return ["--token", "s3cret" if good else "rotated"]
        return ["--config", user_config(d, RIGHT if good else OTHER)]

    creds: dict[str, str] = {"token": "s3cret"} if kind == "token" else {"user": "app", "password": "right-pw"}

    async def body(d: str) -> None:
        first = start_server(fibril_bin, d, *args(d, True))
        second: Server | None = None
        proxy = await Proxy(first.host, first.port).start()
        try:
            async with fibril.connect(proxy.url, reconnect=FAST, **creds) as c:  # type: ignore[arg-type]
                await c.ping()
                kill_server(first)
                second = await asyncio.to_thread(start_server, fibril_bin, d, *args(d, False), listen=first.addr)
                # A client that kept retrying would leave this publish waiting
                # for a connection; wait_for turns that into a failure.
                with pytest.raises(AuthViolationError):
                    await asyncio.wait_for(c.publish("_INBOX.after", b"x"), 10)
                assert not c.is_connected
                dials = proxy.accepted
                await asyncio.sleep(0.3)  # quiet period: no dial after giving up
                assert proxy.accepted == dials
        finally:
            await proxy.close()
            if second is not None:
                stop_server(second)
            else:
                kill_server(first)

    with tempfile.TemporaryDirectory(prefix="fibril-auth-rc-") as d:
        run(body(d))
