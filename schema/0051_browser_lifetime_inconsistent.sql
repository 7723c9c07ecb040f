-- 0051_browser_lifetime_inconsistent: a lifetime result can be 'inconsistent' (issue 27):
-- the browser presented state at some age but not at a shorter one (seen with Chromium
-- under a faked monotonic clock), so no bracket is claimed.

ALTER TABLE browser_lifetime DROP CONSTRAINT browser_lifetime_status_check;
ALTER TABLE browser_lifetime ADD CONSTRAINT browser_lifetime_status_check
    CHECK (status IN ('measured', 'at-least-max', 'never-presented', 'inconsistent', 'n/a'));
COMMENT ON COLUMN browser_lifetime.status IS 'measured (bracketed), at-least-max (still presented at max_age_s), never-presented, inconsistent (presented at some age but not at a shorter one: the bracket means nothing), or n/a (the engine lacks the mechanism, or probes were inconclusive: see detail).';
