-- issue 24: testssl.sh's connections are now gated too (scanners/tls_second_opinion/connectgate.c,
-- preloaded into testssl.sh and every process it starts) and counted in `connections`.
COMMENT ON COLUMN tls_second_opinion.connections IS 'TCP connections the client opened for the whole target, every one granted through the run''s rate limiter (sslyze: scanners/tls_second_opinion/sslyze_gate.py; testssl.sh and the processes it starts: connectgate.c, preloaded); the same on each row of the target; NULL where not counted (gnutls-cli: 2 per check).';
