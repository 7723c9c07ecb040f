"""Helpers shared by test files (no tests here): import them as ``support.<module>`` (the
directory of tests/conftest.py is on sys.path under pytest), or as ``tests.support.<module>``
where a subprocess is given PYTHONPATH=<checkout> (the scanner plugins of ``plugins/``)."""
