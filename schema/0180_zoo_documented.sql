-- 0180_zoo_documented: the server zoos' documented defaults as data. `plot zoo-table` compared
-- netsurvey's measurements with each implementation's documented (cited) default by importing
-- the testbed's code; analysis now reads only the database, and `netsurvey testbed zoo-record`
-- writes the cited facts of every zoo (TLS zoo, TLS zoo 2, DNS zoo, QUIC zoo) here.
-- Not keyed to scan_run: these are the zoo's ground truth (what its implementations document),
-- not a measurement; recorded_at / recorded_by say when and by which netsurvey they were written.
CREATE TABLE zoo_documented_default (
    zoo            text        NOT NULL CHECK (zoo IN ('tls', 'tls2', 'dns', 'quic')),
    label          text        NOT NULL,
    hostname       text,
    addresses      inet[]      NOT NULL DEFAULT '{}',
    port           integer,
    zone           text,
    implementation text,
    fact           text        NOT NULL,
    value          jsonb,
    unit           text,
    detail         jsonb       NOT NULL DEFAULT '{}',
    source         text,
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    recorded_by    text        NOT NULL,
    PRIMARY KEY (zoo, label, fact)
);
COMMENT ON TABLE zoo_documented_default IS 'The documented (cited) default of every fact of every server of the testbed''s zoos, one row per (zoo, server, fact), written by `netsurvey testbed zoo-record` from the zoo''s ground truth; `plot zoo-table` puts each beside netsurvey''s measurement and the independent clients'' verdicts.';
COMMENT ON COLUMN zoo_documented_default.zoo IS 'Which zoo: tls (the shared testbed''s TLS zoo: Go, GnuTLS, lighttpd, HAProxy, JSSE), tls2 (TLS zoo 2: H2O, BoringSSL, rustls), dns (the DNS zoo''s authoritative servers), quic (the QUIC zoo).';
COMMENT ON COLUMN zoo_documented_default.label IS 'The server''s label in its zoo (gotls, bind, quinn, ...).';
COMMENT ON COLUMN zoo_documented_default.hostname IS 'DNS name the server is scanned under; NULL for the DNS zoo''s nameservers (known by address).';
COMMENT ON COLUMN zoo_documented_default.addresses IS 'The server''s addresses (IPv4 first) in the zoo''s namespaces.';
COMMENT ON COLUMN zoo_documented_default.port IS 'TCP/UDP port of the service the facts are about; NULL for the DNS zoo (port 53).';
COMMENT ON COLUMN zoo_documented_default.zone IS 'DNS zoo: the zone every server serves (names asked are relative to it); NULL otherwise.';
COMMENT ON COLUMN zoo_documented_default.implementation IS 'The implementation, version and configuration the facts hold for (as the zoo runs it).';
COMMENT ON COLUMN zoo_documented_default.fact IS 'Fact name, as the zoo''s ground truth names it (tickets, tls13_ticket_lifetime_s, ttl_max_s, vn_versions, ...).';
COMMENT ON COLUMN zoo_documented_default.value IS 'The documented value as JSON (true/false, a number in unit, a string, a list, or an object per case, e.g. per client subnet); null = documented as absent (e.g. no early data).';
COMMENT ON COLUMN zoo_documented_default.unit IS 'Unit of a numeric value: s (seconds), bytes, count; NULL for booleans, strings, lists and objects.';
COMMENT ON COLUMN zoo_documented_default.detail IS 'Further documented properties of the same fact as JSON, e.g. count_per_connection, key_id_len (bytes), greased_extra (count), observable (whether and how a client can see it).';
COMMENT ON COLUMN zoo_documented_default.source IS 'Citation: the place in the implementation''s source or documentation that states the value (file:line or function at the version the zoo runs).';
COMMENT ON COLUMN zoo_documented_default.recorded_at IS 'When zoo-record wrote the row.';
COMMENT ON COLUMN zoo_documented_default.recorded_by IS 'The writer: command and netsurvey version.';
