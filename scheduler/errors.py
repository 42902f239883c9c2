"""Errors a user can meet: one readable line, and the exit code the CLI returns."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or environment. ``str(err)`` is one line: what is wrong, where, what to do."""

    exit_code = 2

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
