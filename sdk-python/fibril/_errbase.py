"""Base class of every error the Fibril SDK raises.

The per-code subclasses live in ``_errors_gen`` (generated from the spec's error
table, ``protocol/errors.json``); client-side errors that never travel on the wire
live in ``errors``. Callers switch on the class or on ``code``, never on the text.
"""

from __future__ import annotations

from typing import ClassVar


class FibrilError(Exception):
    """Base class of all Fibril errors.

    Attributes:
        code: Stable snake_case code from the spec's error table (or a client-side
            code such as ``connection_closed``). Switch on this, never on the text.
        message: Human-readable text (the server's text for wire errors).
        retriable: True when the same request may succeed if tried again later.
        fatal: True when the server closes the connection after this error.
        detail: Context after the table text (``got 00000000, computed ...``), or "".
    """

    code: ClassVar[str] = "unknown"
    retriable: ClassVar[bool] = False
    fatal: ClassVar[bool] = False

    def __init__(self, message: str = "", *, code: str | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        if code is not None and code != type(self).code:
            # Instance attribute shadows the class constant only for codes the
            # generated table does not know (a newer server).
            self.code = code  # type: ignore[misc]

    def __str__(self) -> str:
        if self.message:
            return f"{self.code}: {self.message}"
        return self.code

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"
