"""Ground truth of the QUIC zoo (issue 24), each fact with the implementation's own source
that states it (file:line at the exact version the zoo runs):

- quic-go: module github.com/quic-go/quic-go v0.65.0 as the Go module proxy serves it (the
  source `go install` builds; paths relative to the module root); its TLS is Go's crypto/tls
  of the toolchain (go1.26, GOROOT/src/crypto/tls).
- ngtcp2: tag v0.12.1 of github.com/ngtcp2/ngtcp2 (Debian 12's ngtcp2-server
  0.12.1+dfsg-1+deb12u1 is that release; /usr/sbin/gtlsserver is examples/server.cc with
  examples/tls_server_*_gnutls.cc); its TLS is Debian's GnuTLS 3.7.9 (facts cited as in
  testbed/zoo.py GNUTLS_FACTS).
- quinn: quinn 0.11.12 / quinn-proto 0.11.19 / rustls 0.23.46 as crates.io serves them (the
  versions testbed/zoo/quinn/Cargo.lock pins; paths relative to each crate's root).

``value`` is what the scanners must recover; ``observable`` says whether a client can see it
at all (and how); ``source`` is the citation.
"""
from __future__ import annotations

QUIC_V1 = 0x00000001
QUIC_V2 = 0x6B3343CF

_QG = "quic-go v0.65.0 "
QUICGO_FACTS = {
    "implementation": "quic-go example HTTP/3 server (github.com/quic-go/quic-go/example), -bind/-cert/-key/-www only",
    "vn_versions": {"value": [QUIC_V1, QUIC_V2], "greased_extra": 1,
                    "source": _QG + "internal/protocol/version.go:32 SupportedVersions = {Version1, Version2}; "
                    "internal/wire/version_negotiation.go:36 ComposeVersionNegotiation() adds "
                    "GetGreasedVersions() (version.go:106: one reserved version at a random position)"},
    "retry": {"value": False, "source": _QG + "server.go:758 a Retry only if token == nil && "
              "verifySourceAddress != nil && verifySourceAddress(addr); transport.go:122 Transport."
              "VerifySourceAddress is nil unless set, and http3.Server (example/main.go:168-174) sets none"},
    "new_token": {"value": True, "count_per_connection": 1,
                  "source": _QG + "connection.go:991-995: once the handshake is confirmed the server "
                  "always queues one NEW_TOKEN (tokenGenerator.NewToken) after the session ticket"},
    "token_lifetime_s": {"value": 86400, "observable": "no (the server never sends Retry, so an expired or "
                         "foreign token changes nothing a client sees)",
                         "source": _QG + "transport.go:101-106 MaxTokenAge 'defaults to 24 hours', "
                         "transport.go:216-217 maxTokenAge = 24 * time.Hour; server.go:685 validateToken()"},
    "token_single_use": {"value": False, "source": _QG + "server.go:678-692 validateToken() checks only the "
                         "remote IP (ValidateRemoteAddr) and the age: no record of used tokens"},
    "token_format": {"value": "quic-go", "key_id_len": 0,
                     "source": _QG + "internal/handshake/token_protector.go:15,28-38: salt[32] random || "
                     "AES-GCM(random 12-byte nonce || ASN.1 token{IsRetryToken, RemoteAddr, Timestamp, RTT}) - "
                     "no key id, no constant prefix"},
    "retry_token_lifetime_s": {"value": 10, "source": _QG + "config.go:17-22 maxRetryTokenAge = handshakeTimeout "
                               "= 2 * HandshakeIdleTimeout; internal/protocol/params.go:90 "
                               "DefaultHandshakeIdleTimeout = 5 s (never used here: no Retry)"},
    "tickets": {"value": True, "count_per_connection": 1,
                "source": _QG + "connection.go:981-989 one GetSessionTicket() after handshake confirmation "
                "(internal/handshake/crypto_setup.go:378)"},
    "ticket_lifetime_s": {"value": 604800, "source": "go1.26 src/crypto/tls/handshake_server_tls13.go:1004 "
                          "m.lifetime = maxSessionTicketLifetime; common.go:985 = 7 * 24 h"},
    "ticket_max_early_data": {"value": None,
                              "source": _QG + "internal/handshake/crypto_setup.go:380 EarlyData: h.allow0RTT; "
                              "example/main.go:170-172 passes QUICConfig{Tracer} without Allow0RTT, and "
                              "http3/server.go:339-342 only a nil QUICConfig becomes {Allow0RTT: true}: "
                              "the example server issues tickets without early_data"},
    "zero_rtt": {"value": False, "source": _QG + "internal/handshake/crypto_setup.go:424 handleSessionTicket(): "
                 "'if !h.allow0RTT' 0-RTT is refused (Allow0RTT false, see ticket_max_early_data)"},
    "resumption": {"value": True, "source": "go1.26 crypto/tls: SessionTicketsDisabled false (common.go); "
                   "quic-go keeps resumption without 0-RTT"},
    "ticket_key_scope": {"value": "listener", "measured_by": "hand (scanners.quic.handshake.quic_connect from "
                         "nstq-vantage, 2026-11-24): an IPv4 ticket is not resumed at the IPv6 address, and is at "
                         "IPv4; no netsurvey scanner measures cross-address resumption for QUIC yet",
                         "source": _QG + "example/main.go:167-174 one http3.Server per -bind address, each "
                         "ListenAndServeTLS(); http3/server.go:227-236 builds a new tls.Config per call, and Go's "
                         "crypto/tls draws automatic ticket keys per tls.Config (common.go Config.ticketKeys())"},
}

_NG = "ngtcp2 v0.12.1 "
NGTCP2_FACTS = {
    "implementation": "ngtcp2 example server with GnuTLS (Debian ngtcp2-server gtlsserver), -q -d DOCROOT only",
    "vn_versions": {"value": [QUIC_V1], "greased_extra": 1,
                    "source": _NG + "examples/server.cc:2613-2631 send_version_negotiation(): "
                    "generate_reserved_version() first, then NGTCP2_PROTO_VER_V1 unless --preferred-versions"},
    "retry": {"value": False, "source": _NG + "examples/server.cc:2463-2466 a Retry for a token-less Initial "
              "only 'if (config.validate_addr ...)'; --validate-addr (server.cc:3381) is off by default. The "
              "zoo's second instance (UDP 4443) runs with --validate-addr for the token tests"},
    "retry_with_validate_addr": {"value": True, "source": _NG + "examples/server.cc:2463-2510: with "
                                 "--validate-addr a token-less Initial, or an invalid/expired regular token, "
                                 "gets a Retry (server.cc:2487-2491)"},
    "new_token": {"value": True, "count_per_connection": 1,
                  "source": _NG + "examples/server.cc:699-716 after the handshake: "
                  "ngtcp2_crypto_generate_regular_token() + ngtcp2_conn_submit_new_token()"},
    "token_lifetime_s": {"value": 3600, "observable": "only with --validate-addr (an expired token draws a Retry)",
                         "source": _NG + "examples/server.cc:2830-2833 ngtcp2_crypto_verify_regular_token(..., "
                         "3600 * NGTCP2_SECONDS, t); crypto/shared.c:1213 'if (gen_ts + timeout <= ts)' fails"},
    "token_single_use": {"value": False, "source": _NG + "crypto/shared.c:1150-1220 "
                         "ngtcp2_crypto_verify_regular_token() is stateless (decrypt, address AAD, age): a token "
                         "is accepted as often as it is presented"},
    "token_format": {"value": "ngtcp2", "key_id_len": 0, "token_len_bytes": 57,
                     "source": _NG + "crypto/includes/ngtcp2/ngtcp2_crypto.h:615 NGTCP2_CRYPTO_TOKEN_MAGIC_REGULAR "
                     "0x36, :634 MAX_REGULAR_TOKENLEN = 1 + 8 + 16 + NGTCP2_CRYPTO_TOKEN_RAND_DATALEN (:599, 32); "
                     "crypto/shared.c:1128 magic || AEAD(timestamp) || rand[32]: the constant first byte is a "
                     "format magic, not a key id (the key is derived from the random tail)"},
    "retry_token_lifetime_s": {"value": 10, "source": _NG + "examples/server.cc:2792-2795 "
                               "ngtcp2_crypto_verify_retry_token(..., 10 * NGTCP2_SECONDS, t)"},
    "tickets": {"value": True, "count_per_connection": 1,
                "source": _NG + "examples/tls_server_session_gnutls.cc:77-78 GNUTLS_NO_AUTO_SEND_TICKET, and :148 "
                "gnutls_session_ticket_send(session_, 1, 0) once, from server.cc:695 at handshake completion"},
    "ticket_lifetime_s": {"value": 21600, "source": "GnuTLS 3.7.9 lib/tls13/session_ticket.c "
                          "generate_session_ticket(): lifetime = internals.expire_time = DEFAULT_EXPIRE_TIME "
                          "21600 (lib/gnutls_int.h); the example never calls gnutls_db_set_cache_expiration()",
                          "resumed_counts_down": True,
                          "resumed_source": "GnuTLS lib/tls13/session_ticket.c generate_session_ticket(): on a "
                          "resumed session lifetime = security_parameters.timestamp + expire_time - now (s), 'so "
                          "that we don't extend the lifetime of the ticket past the original session expiration "
                          "time': a ticket issued on a resumption 1 s or more after the original handshake "
                          "(wall-clock seconds) says 21599 or less (measured 21599 on 2026-11-24)"},
    "ticket_max_early_data": {"value": 0xFFFFFFFF, "source": _NG + "examples/tls_server_session_gnutls.cc:116 "
                              "gnutls_record_set_max_early_data_size(session_, 0xffffffffu) with "
                              "GNUTLS_ENABLE_EARLY_DATA (:77)"},
    "zero_rtt": {"value": True, "anti_replay_window_s": 10,
                 "source": _NG + "examples/tls_server_session_gnutls.cc:77,114 "
                 "GNUTLS_ENABLE_EARLY_DATA + gnutls_anti_replay_enable(); tls_server_context_gnutls.cc:37-40 "
                 "the anti-replay add function always returns 0 (never 'seen'). BUT GnuTLS 3.7.9 "
                 "lib/tls13/anti_replay.c:156-167 _gnutls_anti_replay_check(): early data is refused for a "
                 "ticket created before the current recording window's start, and the window (DEFAULT_WINDOW_MS "
                 "10000, :30) rolls over lazily, at the first 0-RTT attempt more than 10 s after the last "
                 "rollover; lib/ext/pre_shared_key.c:707-736 then leaves early_data out of EncryptedExtensions "
                 "(resumption still succeeds). So 0-RTT works for tickets issued after the latest rollover: "
                 "two tickets issued together and presented one after the other, more than 10 s after the "
                 "last rollover, see the first accepted and the second refused (measured, "
                 "tests/testbed/test_zoo_quic.py; the server then also drops the 0-RTT packets: ngtcp2 is right)"},
    "resumption": {"value": True, "source": _NG + "examples/tls_server_session_gnutls.cc:97 "
                   "gnutls_session_ticket_enable_server() with one key per process "
                   "(tls_server_context_gnutls.cc:91 gnutls_session_ticket_key_generate)"},
    "ticket_single_use": {"value": False, "measured_by": "quic-turnover's reuse check (the first ticket "
                          "that resumed, presented once more, resumes again; tests/testbed/test_zoo_quic.py "
                          "test_ngtcp2_token_lifetime_and_reuse)",
                          "source": "GnuTLS 3.7.9 lib/tls13/session_ticket.c: TLS 1.3 tickets are the session "
                          "state encrypted under the server's ticket key (lib/stek.c) and decrypted on use; the "
                          "server keeps no record of tickets used (only 0-RTT has an anti-replay check, "
                          "lib/tls13/anti_replay.c)"},
    "ticket_key_scope": {"value": "process", "measured_by": "hand, as for quic-go: an IPv4 ticket is resumed at "
                         "the IPv6 address",
                         "source": _NG + "examples/tls_server_context_gnutls.cc:91 one "
                         "gnutls_session_ticket_key_generate() per process ('*' binds both families in one server)"},
    "ticket_format": {"value": "gnutls", "key_id_len": 16,
                      "source": "GnuTLS 3.7.9 lib/ext/session_ticket.c pack_ticket(): key_name[16] IV[16] ...; "
                      "lib/gnutls_int.h TICKET_KEY_NAME_SIZE 16"},
}

_QN = "quinn-proto 0.11.19 (crates.io, the version testbed/zoo/quinn/Cargo.lock pins under quinn 0.11.12) "
_QQ = "quinn 0.11.12 "
_RL = "rustls 0.23.46 "
QUINN_FACTS = {
    "implementation": "a stock quinn server (testbed/zoo/quinn: quinn::ServerConfig::with_crypto() of the rustls "
                      "config with_single_cert() builds, plus ALPN h3; every Incoming accepted as it comes) with a "
                      "hand-written minimal HTTP/3 responder",
    "vn_versions": {"value": [QUIC_V1, 0xFF00001D, 0xFF00001E, 0xFF00001F, 0xFF000020, 0xFF000021, 0xFF000022],
                    "greased_extra": 1,
                    "source": _QN + "src/lib.rs:160-168 DEFAULT_SUPPORTED_VERSIONS = [1, draft-29 .. draft-34]; "
                    "src/endpoint.rs:189-203 Version Negotiation: one reserved version first (0x0a1a2a3a, or "
                    "0x0a1a2a4a when the client offered that one), then config.supported_versions in order"},
    "retry": {"value": False, "source": _QQ + "src/incoming.rs:145-151 awaiting an Incoming is accept(); a Retry "
              "is sent only if the application calls Incoming::retry() (:52), as quinn's example server does "
              "only with --stateless-retry (examples/server.rs:37-38,153-155). The zoo server never calls it"},
    "new_token": {"value": True, "count_per_connection": 2, "count_per_handshake_packet": True,
                  "source": _QN + "src/config/mod.rs:525-535 ValidationTokenConfig::default(): sent = 2 with the "
                  "(default) 'bloom' feature, else 0 ('Number of address validation tokens sent to a client when "
                  "its path is validated', :512); src/connection/mod.rs:3790-3799 on_path_validated() clears the "
                  "unsent ones and queues `sent` NEW_TOKEN frames. BUT it is called for every client Handshake "
                  "packet processed in the handshake state (:2547-2559), and tokens already sent in 0.5-RTT are "
                  "not cleared: a client that sends two Handshake packets gets 4. aioquic's qlog against the zoo "
                  "server (2026-11-24): quinn's handshake flight spans two datagrams, aioquic sends a Handshake "
                  "ACK after the first, quinn answers with 1-RTT [new_token, new_token], then aioquic's "
                  "Handshake [ack, crypto(Finished)] draws [handshake_done, ack, ..., new_token, new_token]. Measured (aioquic, 40 connections from nstq-vantage, "
                  "2026-11-24): 4 in 39, 2 in 1. So the source's 2 is per validation event, a client sees "
                  "2 x (its Handshake packets the server processed), at least 2"},
    "token_lifetime_s": {"value": 1209600, "observable": "no (the server never sends Retry: a valid token only "
                         "lifts the anti-amplification limit)",
                         "source": _QN + "src/config/mod.rs:531 lifetime = 2 * 7 * 24 * 60 * 60 s ('Defaults to "
                         "2 weeks', :492); src/token.rs:169-171 an older token is treated as no token"},
    "token_single_use": {"value": True, "observable": "no (as token_lifetime_s)",
                         "source": _QN + "src/token.rs:174-180 TokenLog::check_and_insert(nonce); src/config/"
                         "mod.rs:527 the default log is a BloomTokenLog (src/bloom_token_log.rs:122-130, 10 MiB, "
                         "one million expected hits), which refuses a nonce seen before (TokenReuseError)"},
    "token_format": {"value": "quinn", "key_id_len": 0, "token_len_bytes": {"ipv4": 46, "ipv6": 58},
                     "source": _QN + "src/token.rs:216-243 Token::encode(): AES-256-GCM(type 1 || ip tag || "
                     "ip[4|16] || issued unix s u64) || tag[16] || nonce u128 LE; the key is HKDF-expanded from "
                     "the trailing nonce (src/crypto/ring_like.rs:23-32 aead_from_hkdf()): no key id"},
    "retry_token_lifetime_s": {"value": 15, "source": _QN + "src/config/mod.rs:242 retry_token_lifetime = 15 s "
                               "(never used here: no Retry)"},
    "tickets": {"value": True, "count_per_connection": 2,
                "source": _RL + "src/server/builder.rs:113-123 defaults: session_storage = ServerSessionMemoryCache"
                "(256), ticketer = NeverProducesTickets, send_tls13_tickets = 2 (quinn-proto src/crypto/rustls.rs:"
                "474-489 QuicServerConfig::inner() changes only versions and max_early_data_size)"},
    "ticket_lifetime_s": {"value": 86400, "source": _RL + "src/server/tls13.rs:1345-1361 emit_ticket(): without a "
                          "ticketer the ticket is a 32-byte random id stored in session_storage, "
                          "stateful_lifetime = 24 * 60 * 60"},
    "ticket_max_early_data": {"value": 0xFFFFFFFF, "source": "quinn-proto 0.11.19 src/crypto/rustls.rs:487 "
                              "max_early_data_size = u32::MAX; " + _RL + "src/server/tls13.rs:1365-1367 "
                              "stateful tickets carry it"},
    "zero_rtt": {"value": True, "source": _RL + "src/server/tls13.rs:671 early data needs max_early_data_size > 0 "
                 "and stateful resumption (no ticketer), :693-701 the first PSK, fresh (ticket age within 60 s, "
                 "src/msgs/persist.rs:340,500-519), same version, suite and ALPN"},
    "resumption": {"value": True, "source": _RL + "src/server/tls13.rs:121-135 a stateful ticket is looked up "
                   "with session_storage.take()"},
    "ticket_single_use": {"value": True, "measured_by": "scan quic-turnover's reuse check (the first ticket that "
                          "resumed, presented once more, does not resume; tests/testbed/test_zoo_quic.py "
                          "test_quinn_single_use_tickets_each_age_fresh_killed_run_resumes). Before migration 0163 "
                          "quic-turnover re-presented one ticket at growing ages and read this as a 2-4 s lifetime",
                          "source": _RL + "src/server/tls13.rs:133 session_storage.take() removes "
                          "the entry (src/server/handy.rs:82-84): each ticket resumes once"},
    "ticket_key_scope": {"value": "process", "source": "testbed/zoo/quinn/src/main.rs: one quinn::ServerConfig "
                         "(one rustls ServerConfig, so one session cache, and one token key) for the IPv4 and the "
                         "IPv6 Endpoint"},
    "ticket_format": {"value": "stateful-id", "ticket_len_bytes": 32, "key_id_len": 0,
                      "source": _RL + "src/server/tls13.rs:1351 id = random_vec(32): a session id, no key"},
}

TFO_FACTS = {
    "implementation": "Linux kernel TCP Fast Open server (testbed/tfo_server.py, TCP_FASTOPEN), key pair",
    "key_pair": {"value": True, "source": "Documentation/networking/ip-sysctl.rst tcp_fastopen_key: 'The list "
                 "consists of a primary key and an optional backup key. The primary key is used for both creating "
                 "and validating cookies, while the optional backup key is only used for validating cookies.' "
                 "(commits 9092a76d3cf8 'tcp: add backup TFO key infrastructure' and aa1236cdfa89 'tcp: add support "
                 "for optional TFO backup key to net.ipv4.tcp_fastopen_key', Linux 5.3; net/ipv4/sysctl_net_ipv4.c "
                 "proc_tcp_fastopen_key() parses 'primary,backup'). Machine kernel: 6.18"},
    "backup_key_accepts_cookie": {"value": True, "source": "net/ipv4/tcp_fastopen.c tcp_fastopen_cookie_gen_check(): "
                                  "the cookie is checked against every key of tcp_fastopen_context_len() (primary, "
                                  "then backup); a match on the backup returns 2 ('valid, but a new cookie is "
                                  "needed')"},
    "new_cookie_after_backup_match": {"value": True, "source": "net/ipv4/tcp_fastopen.c tcp_try_fastopen(): "
                                      "ret = tcp_fastopen_cookie_gen_check(); if ret == 2 the SYN-ACK carries a "
                                      "fresh cookie from the primary key (foc->len = valid_foc.len) and "
                                      "TCPFastOpenPassiveAltKey is counted (include/uapi/linux/snmp.h "
                                      "LINUX_MIB_TCPFASTOPENPASSIVEALTKEY)"},
    "old_key_dropped_rejects_cookie": {"value": True, "source": "tcp_fastopen_cookie_gen_check() returns 0 when "
                                       "no key matches: the data in the SYN is not accepted, a new cookie is "
                                       "sent (TCPFastOpenPassiveFail)"},
}

FACTS = {"quicgo": QUICGO_FACTS, "ngtcp2": NGTCP2_FACTS, "tfo": TFO_FACTS, "quinn": QUINN_FACTS}
