"""Pairing codes: what a stranger is given (``bruce.runtime.access``) and the owner types back
(``bruce pairing approve CODE``). A code is 8 characters from an alphabet without look-alikes
(no 0/O, no 1/I), drawn with ``secrets``; what the owner typed is read without case or
separators."""

from __future__ import annotations

import secrets

__all__ = ["CODE_ALPHABET", "CODE_LENGTH", "new_code", "normalized_code"]

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # 32 characters: no 0, O, 1 or I
CODE_LENGTH = 8


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def normalized_code(code: str) -> str:
    """What the owner typed, as stored: case and separators do not matter."""
    return "".join(code.split()).replace("-", "").upper()
