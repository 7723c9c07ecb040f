"""netsurvey: measure connection state kept by Internet protocols."""
__version__ = "0.1.0"


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
