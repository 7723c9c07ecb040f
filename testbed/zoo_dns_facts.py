"""Ground truth of the DNS zoo (issue 24), per implementation: what each authoritative
server does with the zone of testbed/zoo_dns.py under its stock defaults, each fact with
the place in that implementation's own source or documentation that states it (file:line
at the release Debian bookworm ships: BIND v9.18.49, gdnsd v3.8.1, NSD NSD_4_6_1_REL,
PowerDNS auth-4.7.3).

Facts (the keys tests/testbed/test_zoo_dns.py and the zoo table use):

* ``ecs_echo``: a query with an EDNS Client Subnet option (RFC 7871) gets one back.
* ``ecs_scope_static``: the scope prefix returned for a name with static zone data.
* ``ecs_scope_dynamic`` / ``ecs_answer_dynamic`` (gdnsd only): scope and datacenter of the
  ECS-scoped name ``ecs`` per client subnet sent (tests/testbed/test_zoo_dns.py SUBNETS).
* ``ttl_min_s`` / ``ttl_max_s``: the TTL range an answer can carry; zone TTLs outside it
  are clamped (the zone has TTLs 0 .. 2^31-1).
* ``minimal_responses``: a positive answer to an RD=0 query carries no NS RRset in the
  authority section.
* ``nxdomain_rcode`` / ``out_of_zone_rcode``: the RCODE for an unknown name in the zone /
  a name in no zone the server has.

"Resolver-side" TTL limits (BIND's ``max-cache-ttl``, PowerDNS Recursor's
``max-cache-ttl``) cap what a cache keeps; an authoritative server sends the zone's TTL.
Of the four, only gdnsd limits TTLs when it serves them.
"""
from __future__ import annotations

#: tests/testbed/test_zoo_dns.py SUBNETS -> (scope, datacenter) gdnsd returns for ``ecs``.
_GDNSD_DYNAMIC = {"198.18.151.0/24": (20, "dc1"), "192.0.2.0/24": (24, "dc2"),
                  "198.51.100.0/24": (11, "dc3"), "2001:db8:1::/56": (21, "dc3")}

_NX = "NXDOMAIN with the zone's SOA in the authority section (RFC 2308)"

BIND_FACTS = {
    "implementation": "BIND 9 named (Debian bind9 1:9.18), options: listen-on, recursion no, dnssec-validation no",
    "ecs_echo": {"value": True, "source": "lib/ns/client.c:1526-1533 process_ecs(): a valid ECS option in the "
                 "query sets NS_CLIENTATTR_HAVEECS with client->ecs.scope = 0; lib/ns/client.c:1118-1150 "
                 "ns_client_addopt() adds CLIENT-SUBNET to the reply whenever HAVEECS, with that scope"},
    "ecs_scope_static": {"value": 0, "source": "lib/ns/client.c:1532 client->ecs.scope = 0 (only an 'ecs' "
                         "ACL element in a view's match-clients sets another scope, lib/ns/client.c view "
                         "matching; the zoo has no views)"},
    "ttl_min_s": {"value": 0, "source": "no minimum TTL for authoritative data: zone TTLs are served as "
                  "loaded (doc/arm/reference.rst:6646-6660 max-zone-ttl exists only inside a "
                  "dnssec-policy, which the zoo zone has not)"},
    "ttl_max_s": {"value": 2147483647, "source": "doc/arm/reference.rst:6646-6660: max-zone-ttl is a "
                  "dnssec-policy statement (default PT24H there, bin/named/config.c:320) that REJECTS a "
                  "zone, never clamps; without dnssec-policy none applies. max-cache-ttl "
                  "(doc/arm/reference.rst:4408-4416, default 1 week) is the resolver cache's limit, not "
                  "applied to authoritative answers"},
    "minimal_responses": {"value": False, "source": "bin/named/config.c:185 default minimal-responses "
                          "no-auth-recursive; doc/arm/reference.rst:2217-2218: 'the same as no if recursion "
                          "is not requested' - an RD=0 answer carries the apex NS in authority (and glue)"},
    "nxdomain_rcode": {"value": "NXDOMAIN", "source": _NX + " (lib/ns/query.c:465 query_nxdomain())"},
    "out_of_zone_rcode": {"value": "REFUSED", "source": "a name in no zone is looked up in the cache: "
                          "lib/ns/query.c:925-937 query_checkcacheaccess() -> DNS_R_REFUSED unless allow-query-cache "
                          "matches; doc/arm/reference.rst:3015-3026: with 'recursion no' allow-query-cache "
                          "defaults to none"},
}

GDNSD_FACTS = {
    "implementation": "gdnsd 3 (Debian gdnsd 3.8.1), options: listen, run_dir, state_dir; geoip plugin, nets map",
    "ecs_echo": {"value": True, "source": "docs/gdnsd.config.podin:481-488 edns_client_subnet (default true): "
                 "'gdnsd only includes this EDNS option in responses to queries which also contained the "
                 "option'"},
    "ecs_scope_static": {"value": 0, "source": "docs/gdnsd.config.podin:485-486: 'In the case of normal "
                         "responses from static zone data, the scope mask will be set to zero'"},
    "ecs_scope_dynamic": {"value": {s: v[0] for s, v in _GDNSD_DYNAMIC.items()},
                          "source": "docs/gdnsd-plugin-geoip.podin:84-89: subnets merged 'into the largest "
                          "possible supernets which contain identical responses', which set the scope; "
                          "190-216 nets: the matching entry (198.18.144.0/20 -> 20, 192.0.2.0/24 -> 24); an "
                          "unmatched subnet gets the largest supernet holding no entry (198.51.100.0/24 -> "
                          "/11, 2001:db8:1::/56 -> /21, measured)"},
    "ecs_answer_dynamic": {"value": {s: v[1] for s, v in _GDNSD_DYNAMIC.items()},
                           "source": "docs/gdnsd-plugin-geoip.podin:163-171 datacenters: 'The order specified "
                           "here is the fallback default result ordering' (dc3 first: the default)"},
    "ttl_min_s": {"value": 5, "source": "docs/gdnsd.config.podin:73-79 min_ttl 'default 5 ... Any TTL found "
                  "in a zone which is below this value will be clamped to this value'"},
    "ttl_max_s": {"value": 3600000, "source": "docs/gdnsd.config.podin:62-71 max_ttl 'default 3600000 "
                  "(~42 days) ... Any TTL found in a zone which exceeds this value will be clamped'"},
    "minimal_responses": {"value": True, "source": "docs/Manual.md:237 'gdnsd generally aims for minimal "
                          "responses in the first place ... only places RR sets in the additional section "
                          "when they're necessary glue' (no apex NS in authority of an answer)"},
    "nxdomain_rcode": {"value": "NXDOMAIN", "source": _NX},
    "out_of_zone_rcode": {"value": "REFUSED", "source": "src/dnspacket.c:1841-1844 db_lookup(): "
                          "DNAME_NOAUTH -> DNS_RCODE_REFUSED"},
}

NSD_FACTS = {
    "implementation": "NSD 4 (Debian nsd 4.6.1), options: ip-address, username \"\", files in the state dir",
    "ecs_echo": {"value": False, "source": "edns.c:87-121 edns_handle_option(): only NSID (3) and COOKIE (10) "
                 "are handled, every other option (ECS = 8) is skipped (default: buffer_skip); edns.h:20-22 "
                 "defines no ECS code: no ECS in replies"},
    "ecs_scope_static": {"value": None, "source": "no ECS option in the reply (see ecs_echo)"},
    "ttl_min_s": {"value": 0, "source": "zone TTLs served as loaded: nsd.conf.5.in has no TTL limit option"},
    "ttl_max_s": {"value": 2147483647, "source": "zone TTLs served as loaded (nsd.conf.5.in: no TTL limit "
                  "option; RFC 2181 8 bounds a zone TTL at 2^31-1)"},
    "minimal_responses": {"value": False, "source": "nsd.conf.5.in:441-447 minimal-responses 'The default is "
                          "no'; query.c:1084-1088 answer_authoritative() adds the apex NS RRset to the "
                          "(optional) authority section unless minimal_responses"},
    "nxdomain_rcode": {"value": "NXDOMAIN", "source": _NX},
    "out_of_zone_rcode": {"value": "REFUSED", "source": "query.c:1290-1302 answer_lookup_zone(): no zone for "
                          "the name -> RCODE_REFUSE (EDE 20 Not Authoritative)"},
}

PDNS_FACTS = {
    "implementation": "PowerDNS Authoritative 4 (Debian pdns-server 4.7.3), bind backend, options: launch, "
                      "bind-config, local-address, socket-dir, daemon=no, guardian=no",
    "ecs_echo": {"value": False, "source": "docs/settings.rst:666-674 edns-subnet-processing 'Default: no'; "
                 "pdns/auth-main.cc:232; pdns/dnspacket.cc:609 the ECS option is parsed (and so echoed) only "
                 "if s_doEDNSSubnetProcessing"},
    "ecs_scope_static": {"value": None, "source": "no ECS option in the reply (see ecs_echo)"},
    "ttl_min_s": {"value": 0, "source": "the bind backend serves the zone file's TTLs (docs/settings.rst:486 "
                  "default-ttl applies only to records without a TTL)"},
    "ttl_max_s": {"value": 2147483647, "source": "no TTL limit among the authoritative settings "
                  "(docs/settings.rst); max-cache-ttl is a Recursor setting"},
    "minimal_responses": {"value": True, "source": "pdns/packethandler.cc doQuestion(): the authority section "
                          "of an answer gets only referral NS/DS (1196-1212) or the SOA of a negative answer "
                          "(1171-1176 makeNXDomain); no apex NS is added to positive answers"},
    "nxdomain_rcode": {"value": "NXDOMAIN", "source": _NX + " (pdns/packethandler.cc:1171-1176 makeNXDomain())"},
    "out_of_zone_rcode": {"value": "REFUSED", "source": "pdns/packethandler.cc:1490-1494: no authority over the "
                          "name -> RCode::Refused, AA cleared"},
}

PDNSECS_FACTS = dict(
    PDNS_FACTS,
    implementation="PowerDNS Authoritative 4.7.3 as pdns, plus edns-subnet-processing=yes",
    ecs_echo={"value": True, "source": "pdns/dnspacket.cc:609-613 with s_doEDNSSubnetProcessing the query's ECS "
              "option is parsed (d_haveednssubnet); dnspacket.cc:375-380 wrapup() then adds it to the reply"},
    ecs_scope_static={"value": 0, "source": "pdns/dnspacket.cc:351-354, 377: scope = the largest scopeMask of the "
                      "reply's records; the bind backend sets none (0: only the geoip/LUA paths set it, "
                      "packethandler.cc:426, 1589)"},
)

FACTS = {"bind": BIND_FACTS, "gdnsd": GDNSD_FACTS, "nsd": NSD_FACTS, "pdns": PDNS_FACTS, "pdnsecs": PDNSECS_FACTS}
