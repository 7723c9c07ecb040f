"""QUIC scanners (issue 6): discovery (Version Negotiation, Alt-Svc, HTTPS RR), handshakes
with NEW_TOKEN tokens and session tickets, and their turnover. See README.md."""
