"""TLS against the real server's TLS listener (INFO in clear, then the handshake)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Server, start_server, stop_server
from helpers import run, unique

import fibril
from fibril import sync


@pytest.fixture(scope="module")
def tls_server(fibril_bin: Path) -> Iterator[tuple[Server, str, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not available to make a test certificate")
    with tempfile.TemporaryDirectory(prefix="fibril-tls-") as d:
        cert, key = Path(d) / "cert.pem", Path(d) / "key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
            check=True, capture_output=True,
        )
        data = Path(d) / "data"
        data.mkdir()
        s = start_server(fibril_bin, str(data), "--tls-listen", "127.0.0.1:0",
                         "--tls-cert", str(cert), "--tls-key", str(key))
        try:
            tls_addr = s.ready.get("tls_addr")
            assert isinstance(tls_addr, str), s.ready
            yield s, tls_addr, cert
        finally:
            stop_server(s)


def test_tls_publish_subscribe(tls_server: tuple[Server, str, Path]) -> None:
    _, addr, cert = tls_server
    ctx = ssl.create_default_context(cafile=str(cert))
    subject = "_INBOX." + unique("tls")

    async def body() -> None:
        async with fibril.connect(f"tls://{addr}", tls=ctx) as c:
            assert c.server_info.get("tls_required") is True
            async with c.subscribe(subject) as sub:
                assert await c.publish(subject, b"secret") is None
                assert (await sub.next()).data == b"secret"

    run(body())


def test_tls_rejects_unknown_certificate(tls_server: tuple[Server, str, Path]) -> None:
    _, addr, _ = tls_server

    async def body() -> None:
        with pytest.raises(fibril.TLSError) as ei:
            await fibril.connect(f"tls://{addr}", reconnect=False)  # system CAs do not know it
        assert isinstance(ei.value.__cause__, ssl.SSLCertVerificationError)
        assert not ei.value.retriable
    with pytest.raises(fibril.TLSError):
        sync.connect(f"tls://{addr}")

    run(body())


def test_sync_client_tls(tls_server: tuple[Server, str, Path]) -> None:
    _, addr, cert = tls_server
    with sync.connect(f"tls://{addr}", tls=ssl.create_default_context(cafile=str(cert))) as c:
        c.ping()
        assert c.publish("_INBOX." + unique("stls"), b"x") is None
