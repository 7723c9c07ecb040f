"""The quic-second-opinion measurement: ngtcp2's client (Debian ngtcp2-client) as an independent opinion on `scan quic` (issue 24)."""
