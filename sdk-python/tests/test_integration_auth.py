"""Token auth and server limits against a real ``fibril serve --token``."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Server, start_server, stop_server
from helpers import run, unique

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
