"""The handshake-timing measurement (netsurvey new-measurement scaffold)."""
