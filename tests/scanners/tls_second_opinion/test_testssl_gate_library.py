"""The connect gate that `scan tls-second-opinion --client testssl` preloads into testssl.sh
(scanners/tls_second_opinion/testssl.py gate_library, connectgate.c): the library is never
one that another local user could have planted in a shared cache directory."""
from __future__ import annotations

import os
import sys

import pytest

from conftest import REPO

pytestmark = [pytest.mark.timeout(300)]

def test_connect_gate_library_planted_by_another_user_is_not_preloaded(tmp_path, monkeypatch):
    """gate_library() returned any existing <cache>/netsurvey/connectgate-<tag>.so: with the
    cache in a shared directory another local user could plant the library that root then
    LD_PRELOADs into testssl.sh and every process it starts."""
    if os.geteuid() != 0:
        pytest.skip("needs root (a file of another user)")
    sys.path.insert(0, str(REPO))
    from scanners.tls_second_opinion import testssl

    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(0o1777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    import hashlib
    tag = hashlib.sha256(testssl.GATE_SOURCE.read_bytes()).hexdigest()[:12]
    (cache / "netsurvey").mkdir()
    (cache / "netsurvey").chmod(0o777)
    planted = cache / "netsurvey" / f"connectgate-{tag}.so"
    planted.write_bytes(b"not the gate")
    os.chown(planted, 65534, 65534)
    lib = testssl.gate_library()
    assert lib.read_bytes() != b"not the gate"
    st = lib.stat()
    assert st.st_uid == os.geteuid() and not st.st_mode & 0o022
    parent = lib.parent.stat()
    assert parent.st_uid == os.geteuid() and not parent.st_mode & 0o022
