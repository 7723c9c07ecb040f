"""Secrets never leave the environment: DSN passwords and API keys are masked wherever a
command line is printed or recorded (DSNs themselves: :func:`netsurvey.db.mask_dsn`)."""
from __future__ import annotations

import re
from typing import Iterable

MASK = "***"

SECRET_OPTIONS = ("--dsn", "--api-key", "--key", "--password")


def mask_argv(argv: Iterable[str]) -> list[str]:
    """A command line fit for logs and the database: DSN passwords masked, secret options'
    values replaced."""
    out: list[str] = []
    hide_next = False
    for a in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        flag, eq, _ = a.partition("=")
        if flag in SECRET_OPTIONS:
            if eq:
                out.append(f"{flag}={MASK}")
            else:
                out.append(a)
                hide_next = True
            continue
        out.append(_mask_arg(a))
    return out


_PASSWORD_IN_TEXT = re.compile(r"""(password\s*=\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\S+)""", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


def mask_text(text: str) -> str:
    """Free text (an exception's message recorded with a failed run or printed) with every
    DSN password masked: ``password=...`` in any spacing or quoting, and URL passwords.
    Then word by word as :func:`mask_argv` does."""
    text = _PASSWORD_IN_TEXT.sub(lambda m: m.group(1) + MASK, text)
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + "@", text)
    return " ".join(mask_argv(text.split()))


def _mask_arg(arg: str) -> str:
    """An argument that looks like a DSN is masked by :func:`netsurvey.db.mask_dsn` (the one
    DSN masking of the project); one that mentions a password and does not parse is hidden."""
    if "://" not in arg and "password" not in arg.lower():
        return arg
    from .db import mask_dsn

    masked = mask_dsn(arg)
    if masked == "(not a valid DSN)":
        return MASK if "password" in arg.lower() or "@" in arg else arg
    return masked
