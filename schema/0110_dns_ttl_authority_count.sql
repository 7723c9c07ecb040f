-- 0110_dns_ttl_authority_count (issue 24, the DNS zoo): how many records a reply carried in
-- its authority section, so that minimal responses (no NS RRset in the authority section of
-- a positive answer: gdnsd, PowerDNS) can be told from full ones (BIND's default for RD=0,
-- NSD's default) by `scan dns-ttl`.
ALTER TABLE dns_ttl_probe ADD COLUMN authority_count smallint CHECK (authority_count >= 0);
COMMENT ON COLUMN dns_ttl_probe.authority_count IS 'Records in the authority section of the recorded reply (NS of the zone in a full positive answer, SOA in a negative one); NULL without reply and in rows written before migration 0110.';
