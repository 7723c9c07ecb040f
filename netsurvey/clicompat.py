"""typer >= 0.20 carries its own copy of click (``typer._click``); older typer uses click.
This module names the exception classes of whichever is in use."""
from __future__ import annotations

try:
    from typer._click import exceptions as click_exceptions
except ImportError:  # typer < 0.20
    from click import exceptions as click_exceptions  # type: ignore[no-redef]  # typer < 0.20: click's

__all__ = ["click_exceptions"]

try:
    from typer.exceptions import Abort, Exit
except ImportError:  # typer < 0.20
    from click.exceptions import Abort, Exit  # type: ignore[no-redef]  # typer < 0.20: click's

__all__ += ["Abort", "Exit"]
