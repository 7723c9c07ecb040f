"""netsurvey: measure connection state kept by Internet protocols."""
__version__ = "0.1.0"


def connect(dsn=None, config=None, **kwargs):
    """A psycopg connection to the netsurvey database (see netsurvey.api)."""
    from .api import connect as _connect

    return _connect(dsn, config, **kwargs)


def load(run, table, **kwargs):
    """One run's rows of ``table`` as a pandas DataFrame (see netsurvey.api)."""
    from .api import load as _load

    return _load(run, table, **kwargs)


def _lighter_dnspython() -> None:
    """dnspython imports httpx (DoH), aioquic (DoQ) and trio when they are installed, ~0.2 s
    of start-up in every process (each shard of a sharded run pays it). netsurvey speaks
    plain DNS over UDP/TCP only, so turn those optional transports off before any import."""
    try:
        import dns._features as features
    except ImportError:  # dnspython absent or too old to have the switch
        return
    for name in ("doh", "doq", "trio"):
        features.force(name, False)


_lighter_dnspython()
