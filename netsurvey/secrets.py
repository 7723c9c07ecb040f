"""Secrets never leave the environment: DSN passwords and API keys are masked wherever a
command line, DSN or parameter set is printed or recorded."""
from __future__ import annotations

import re
from typing import Iterable

MASK = "***"

#: URL userinfo password (postgresql://user:PASSWORD@host), key=value password in a
#: libpq keyword DSN, and the value of options that carry secrets
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)(?P<pw>[^@\s]*)(?P<at>@)")
_KV_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)(?P<pw>'(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
SECRET_OPTIONS = ("--dsn", "--api-key", "--key", "--password")


def mask_dsn(text: str) -> str:
    """``postgresql://u:pw@h/db`` -> ``postgresql://u:***@h/db``; ``password=pw`` -> ``password=***``."""
    if not text:
        return text
    text = _URL_PASSWORD.sub(lambda m: m["head"] + MASK + m["at"], text)
    return _KV_PASSWORD.sub(lambda m: m["head"] + MASK, text)


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
        out.append(mask_dsn(a))
    return out
