"""Validated configuration: `config/survey.toml` loaded into pydantic models.

Every key is documented in the commented sample `config/survey.toml`. Errors name the
file, the dotted key and the reason, and raise :class:`UsageError` (exit 2).
"""
from __future__ import annotations

import ipaddress
import os
import tomllib
from pathlib import Path
from typing import Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import UsageError

#: Where the CLI looks when neither --config nor NETSURVEY_CONFIG is given.
DEFAULT_CONFIG_PATH = Path("config/survey.toml")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatabaseConfig(_Strict):
    #: libpq connection string; empty = embedded pgserver. NETSURVEY_DSN / --dsn override it.
    dsn: str = ""
    #: Data directory of the embedded PostgreSQL (relative to the working directory).
    data_dir: Path = Path(".netsurvey/pgdata")
    #: DSN of a read-only role for `netsurvey sql` on an external server
    #: (NETSURVEY_READER_DSN overrides it). Empty: the embedded server's netsurvey_reader.
    reader_dsn: str = ""
    #: Default statement timeout of `netsurvey sql` in seconds (its --timeout-s overrides it).
    statement_timeout_s: float = Field(300, gt=0, allow_inf_nan=False)


class TargetsConfig(_Strict):
    #: Import nothing if more than this share (0..1) of the non-blank lines is malformed.
    max_bad_share: float = Field(0.01, ge=0.0, le=1.0, allow_inf_nan=False)


def _networks(values: list[str]) -> list[str]:
    for v in values:
        ipaddress.ip_network(v, strict=False)  # raises ValueError with a clear reason
    return values


class EtiquetteConfig(_Strict):
    """Scanner etiquette shared by every scanner."""

    #: Only addresses inside these networks are ever contacted. The default is the
    #: testbed's ranges; a real campaign sets e.g. ["0.0.0.0/0", "::/0"].
    allow: list[str] = ["198.18.0.0/15", "2001:2::/48"]
    #: Never contacted even if allowed (reserved ranges, opt-outs).
    block: list[str] = []
    #: Extra blocklist / opt-out files, one network per line, '#' comments.
    blocklist_files: list[Path] = []
    #: Global probe rate limit in packets (or connections) per second.
    rate_pps: float = Field(10_000, gt=0, allow_inf_nan=False)
    #: Per-destination-address limit in probes per second.
    per_destination_pps: float = Field(20, gt=0, allow_inf_nan=False)
    #: Networks of servers the researcher runs (their own recursive resolver, the
    #: testbed): the per-destination limit does not apply to them; the global rate does.
    #: Default none: a config that sets per_destination_pps gets it everywhere. The sample
    #: config/survey.toml lists the testbed's ranges.
    own_servers: list[str] = []
    #: Contact string added to any HTTP User-Agent the scanners send.
    contact: str = "netsurvey research scan; see https://example.test/optout"

    _check_allow = field_validator("allow", "block", "own_servers")(classmethod(lambda cls, v: _networks(v)))


class SurveyConfig(_Strict):
    database: DatabaseConfig = DatabaseConfig()
    targets: TargetsConfig = TargetsConfig()
    etiquette: EtiquetteConfig = EtiquetteConfig()
    #: Per-scanner option tables ([scanners.tfo], [scanners.tls], ...), validated by each scanner.
    scanners: dict[str, dict] = {}
    #: Name of this vantage recorded with every run (scan_run.vantage.name; --vantage wins; default the hostname).
    vantage_name: Optional[str] = None


_OptFloat = TypeVar("_OptFloat", bound=Optional[float])


def finite(value: _OptFloat, option: str, *, positive: bool = False, minimum: float | None = None) -> _OptFloat:
    """``value`` if it is a finite number (and > 0 with ``positive``, >= ``minimum``);
    else a UsageError naming ``option``. Call sites: ``rate = finite(rate, "--rate", positive=True)``."""
    import math

    if value is None:
        return value
    if not math.isfinite(value):
        raise UsageError(f"{option}: {value!r} is not a finite number")
    if positive and value <= 0:
        raise UsageError(f"{option}: must be greater than 0 (got {value!r})")
    if minimum is not None and value < minimum:
        raise UsageError(f"{option}: must be at least {minimum:g} (got {value!r})")
    return value


def _format_validation_error(path: Path, err: ValidationError) -> str:
    first = err.errors()[0]
    key = ".".join(str(p) for p in first["loc"]) or "(top level)"
    return f"{path}: {key}: {first['msg']}"


#: Largest config or schedule file read (a device such as /dev/zero never ends).
MAX_TOML_BYTES = 16 * 2**20


def read_input_bytes(path: Path, what: str, limit_bytes: int = MAX_TOML_BYTES) -> bytes:
    """An input file's bytes, for every file a user names (config, schedule, blocklist):
    a FIFO is refused (opening it waits for a writer, for ever) and at most ``limit_bytes``
    are read (a device such as /dev/zero never ends); each is a UsageError naming the file.
    OSError (missing, unreadable) is the caller's to word."""
    import stat

    path = Path(path)
    if stat.S_ISFIFO(path.stat().st_mode):
        raise UsageError(f"{path}: {what} is a FIFO, not a file")
    with path.open("rb") as fh:
        data = fh.read(limit_bytes + 1)
    if len(data) > limit_bytes:
        raise UsageError(f"{path}: {what} is larger than {limit_bytes // 2**20} MiB")
    return data


def load_toml_model(path: Path, model: type[BaseModel], what: str = "config file"):
    """Read a TOML file and validate it into ``model``. Every failure (missing, unreadable,
    not UTF-8, not TOML, invalid value) is one UsageError naming the file, line or key, and
    the reason."""
    path = Path(path)
    try:
        raw = tomllib.loads(read_input_bytes(path, what).decode("utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: {what} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:   # TOML is UTF-8 by definition
        line = exc.object[:exc.start].count(b"\n") + 1
        raise UsageError(f"{path}:{line}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise UsageError(_format_validation_error(path, exc)) from None


def load_config(path: Optional[Path] = None) -> SurveyConfig:
    """Load and validate the survey config.

    ``path`` None means: $NETSURVEY_CONFIG, else ./config/survey.toml if it exists, else
    built-in defaults.
    """
    explicit = path is not None or "NETSURVEY_CONFIG" in os.environ
    if path is None:
        path = Path(os.environ.get("NETSURVEY_CONFIG", DEFAULT_CONFIG_PATH))
    if not path.exists():
        if explicit:
            raise UsageError(f"{path}: config file not found")
        return SurveyConfig()
    return load_toml_model(path, SurveyConfig)
