"""netsurvey: measure connection state kept by Internet protocols."""
__version__ = "0.1.0"
