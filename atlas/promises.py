"""How the promise matrix (tests/promises/test_promises.py) aims the Atlas campaign at the
testbed: its network contact is the Atlas API (the stand-in at atlas.test), with the key the
testbed provides."""
from __future__ import annotations

from netsurvey.measure import PromiseCase

KEY_FILE = "/run/netsurvey/testbed/atlas-api-key"

ATLAS = PromiseCase(
    cmd=("atlas", "run"), hosts=(),
    args=["--probes", "country:DE", "--count", "800", "--server", "198.18.0.1", "--zone", "whoami.example.test",
          "--api-host", "atlas.test", "--poll", "0.3", "--no-server-ping",
          "--ca-bundle", "/run/netsurvey/testbed/pki/ca.pem"],
    block="atlas.test", targets={"198.18.2.200", "2001:2:0:2::200"}, refuse_ok=True,
    env_from_files={"NETSURVEY_ATLAS_KEY": KEY_FILE},
    requires={KEY_FILE: "no Atlas stand-in key"},
    na={"rate": "one API client; RIPE Atlas paces the probes, not this host",
        "blocked": "the API host is the service the campaign talks to, not a measurement target "
                   "(its targets are contacted by RIPE's probes)",
        "sigterm": "the campaign's rows are written as the API answers (not covered here)",
        "worker_config": "a campaign is not sharded",
        "procs_secret": "a campaign is not sharded"})
