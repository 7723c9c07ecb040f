"""Simulation models of the thesis (Sy 2019) and of BLAST (Wang, NDSS 2020).

Each model is a pure function of its inputs (no network, no clock): it takes typed input
records and options (frozen dataclasses, units in the attribute docs) and returns a plain
dict that is printed as JSON by ``netsurvey simulate MODEL``. Input files are documented in
``analysis/README.md``; ``analysis.models.inputs`` reads them, or the documented
``model_*`` views from the database when ``--input`` is not given.
"""

#: CLI name -> module (each has ``run_from_file`` / ``run_from_db`` via analysis.cli).
MODELS = ["tfo-revisits", "tls-across-hostnames", "shared-address-validation", "oob-tokens",
          "quicsocks", "prolongation", "pageload"]
