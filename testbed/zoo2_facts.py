"""Ground truth of TLS zoo 2 (testbed/zoo2.py), cited from each implementation's own source,
in testbed/zoo.py's fact vocabulary (``{"value": ..., "source": ...}``; ``None`` = not
applicable). Extra keys: ``tls13_ticket_nonce_bytes`` (what tells BoringSSL's tickets from
OpenSSL's), ``tls13_tickets_need_server_write`` and, where a fact differs per TLS version,
``tls12_tickets`` / ``tls13_tickets``.

Sources read (the versions the testbed runs, or the nearest tag):
- H2O: h2o/h2o tag v2.2.5 (Debian h2o 2.2.5+dfsg2-7, linked with OpenSSL 3.0).
- BoringSSL: google/boringssl 123eaaef26abc278f53ae338e9c758eb01c70b08 (2022-01, the era of
  Debian android-boringssl 13.0.0+r24, Android 13's external/boringssl).
- rustls: rustls/rustls tag v/0.23.43 (testbed/zoo/rustls/Cargo.lock pins 0.23.46; the
  parts cited are unchanged across 0.23.x as far as read).
- OpenSSL 3.0 where H2O leaves things to it.
"""
from __future__ import annotations

_H2O = "h2o v2.2.5 src/ssl.c "
_BS = "boringssl 123eaaef ssl/"
_RS = "rustls v/0.23.43 rustls/src/"

H2O_FACTS = {
    "implementation": "H2O 2.2.5 (Debian h2o, OpenSSL 3.0), listen + ssl certificate only, no ssl-session-resumption",
    "session_ids": {"value": True, "source": _H2O + "init_openssl(): cache_init_defaults() -> setup_cache_internal(): "
                    "SSL_SESS_CACHE_SERVER | SSL_SESS_CACHE_NO_AUTO_CLEAR, SSL_CTX_set_timeout(conf.lifetime) "
                    "(applied by ssl_setup_session_resumption(), src/main.c)"},
    "tickets": {"value": True, "source": _H2O + "init_openssl(): ticket_init_defaults() (update_thread = "
                "ticket_internal_updater); ssl_setup_session_resumption(): SSL_CTX_set_tlsext_ticket_key_cb("
                "ticket_key_callback_ossl)"},
    "tls12_lifetime_hint_s": {"value": 3600, "source": _H2O + "init_openssl(): 'conf.lifetime = 3600; /* default "
                              "value for session timeout is 1 hour */', SSL_CTX_set_timeout(ctx, conf.lifetime); OpenSSL "
                              "construct_stateless_ticket(): hint = session timeout"},
    "tls13_ticket_lifetime_s": {"value": 3600, "source": "the session timeout (3600 s, as the TLS 1.2 hint): TLS 1.3 "
                                "is OpenSSL's - H2O 2.2.5's picotls speaks only drafts 26-28 (deps/picotls/lib/"
                                "picotls.c supported_versions) and lib/common/socket.c proceed_handshake() falls "
                                "back to OpenSSL ('fallback to openssl if the attempt failed') for a final TLS 1.3 "
                                "ClientHello; the picotls path would say 7 days (src/ssl.c 'pctx->ticket_lifetime = "
                                "86400 * 7; // FIXME conf.lifetime')"},
    "tls13_ticket_count": {"value": 2, "source": "OpenSSL ssl/ssl_lib.c SSL_CTX_new_ex(): num_tickets = 2; H2O never "
                           "calls SSL_CTX_set_num_tickets"},
    "tls13_ticket_nonce_bytes": {"value": 8, "source": "OpenSSL ssl/statem/statem_srvr.c TICKET_NONCE_SIZE 8"},
    "tls13_max_early_data": {"value": None, "source": "H2O 2.2.5 never calls SSL_CTX_set_max_early_data (OpenSSL "
                             "default 0: no early_data extension)"},
    "ticket_family": {"value": "openssl", "source": _H2O + "ticket_key_callback(): RAND name[16] and iv into "
                      "OpenSSL's ticket-key callback, EVP_aes_256_cbc() / HMAC EVP_sha256() (ticket_init_defaults()) "
                      "- OpenSSL's construct_stateless_ticket() layout, not a format of H2O's own"},
    "ticket_key_id_len": {"value": 16, "source": _H2O + "struct st_session_ticket_t: unsigned char name[16]"},
    "ticket_key_scope": {"value": "process", "source": _H2O + "static session_tickets (one vector for every "
                         "SSL_CTX and thread of the process)"},
    "key_rotation_s": {"value": 900, "source": _H2O + "update_tickets(): a new key once 'tickets->entries[0]->"
                       "not_before + conf.lifetime / 4 < now' (3600 / 4 = 900 s), with not_before = now + 60 (made "
                       "60 s before it is used) and not_after = not_before + lifetime - 1 (each key decrypts for "
                       "3600 s); ticket_internal_updater() checks every 114-120 s ('sleep(120 - (h2o_rand() >> 16) "
                       "% 7)'), so the encrypting key changes every 960-1080 s. Checked under libfaketime at 60x "
                       "(tests/testbed/test_zoo_tls2.py test_h2o_key_rotation_under_faketime)"},
    "key_acceptance_s": {"value": 3600, "source": _H2O + "new_ticket(..., not_before, not_before + conf.lifetime - "
                         "1): a key is dropped once now > not_after (update_tickets()), i.e. 3600 s after it starts "
                         "encrypting (+ up to one 120 s updater check). The documentation (srcdoc/configure/"
                         "base_directives.mt, ssl-session-resumption) says secrets 'expire (and gets removed) after 5/4 "
                         "of the session lifetime', which would keep every ticket good for its 3600 s hint: the source "
                         "is right - under libfaketime (60x) first-key tickets were refused at ticket ages of ~3240 s, "
                         "once the key's not_after had passed (tests/testbed/test_zoo_tls2.py "
                         "test_h2o_ticket_key_acceptance_source_not_docs)"},
}

BSSL_FACTS = {
    "implementation": "BoringSSL bssl server (Debian android-boringssl 13.0.0+r24), -accept 443 -loop -www",
    "session_ids": {"value": True, "source": _BS + "internal.h SSL_CTX session_cache_mode = SSL_SESS_CACHE_SERVER; "
                    "handshake_server.cc do_select_parameters(): a 32-byte session_id only '!hs->ticket_expected && "
                    "(session_cache_mode & SSL_SESS_CACHE_SERVER)' (a client offering tickets gets none)"},
    "tickets": {"value": True, "source": _BS + "handshake_server.cc do_send_server_finished() (TLS 1.2) and "
                "tls13_server.cc add_new_session_tickets() unless SSL_OP_NO_TICKET (tool/server.cc sets no option)"},
    "tls12_lifetime_hint_s": {"value": 7200, "source": _BS + "handshake_server.cc do_send_server_finished(): "
                              "CBB_add_u32(&body, session->timeout) after ssl_session_rebase_time(); ssl_session.cc "
                              "ssl_get_new_session(): TLS 1.2 timeout = session_ctx->session_timeout = "
                              "SSL_DEFAULT_SESSION_TIMEOUT (include/openssl/ssl.h: 2 * 60 * 60). The rebase counts "
                              "whole seconds since the session was made: 7199 if a second ticks over mid-handshake"},
    "tls13_ticket_lifetime_s": {"value": 172800, "source": _BS + "ssl_session.cc ssl_get_new_session(): TLS 1.3 "
                                "timeout = session_psk_dhe_timeout = SSL_DEFAULT_SESSION_PSK_DHE_TIMEOUT (2 * 24 * 60 "
                                "* 60); tls13_server.cc add_new_session_tickets(): CBB_add_u32(&body, "
                                "session->timeout)"},
    "tls13_ticket_count": {"value": 2, "source": _BS + "tls13_server.cc add_new_session_tickets(): 'static const int "
                           "kNumTickets = 2'"},
    "tls13_ticket_nonce_bytes": {"value": 1, "source": _BS + "tls13_server.cc add_new_session_tickets(): 'uint8_t "
                                 "nonce[] = {static_cast<uint8_t>(i)}'"},
    "tls13_tickets_need_server_write": {"value": True, "source": _BS + "tls13_server.cc do_send_new_session_ticket(): "
                                        "'the NewSessionTicket isn't flushed until the server performs a write'; "
                                        "tool/server.cc HandleWWW() writes only for a request starting 'GET ': a HEAD "
                                        "gets no answer and so no TLS 1.3 tickets (scan tls --tls13-request GET)"},
    "tls13_max_early_data": {"value": None, "source": "tool/server.cc: SSL_CTX_set_early_data_enabled() only with "
                             "-early-data"},
    "ticket_family": {"value": "boringssl", "source": _BS + "ssl_session.cc ssl_encrypt_ticket_with_cipher_ctx(): "
                      "key_name[16] | iv[16] (EVP_aes_128_cbc) | CBC(session) | HMAC (tlsext_tick_md = SHA-256)[32]: "
                      "OpenSSL's shape, told apart by the 1-byte TLS 1.3 ticket_nonce"},
    "ticket_key_id_len": {"value": 16, "source": _BS + "ssl_session.cc ssl_ctx_rotate_ticket_encryption_key(): "
                          "RAND_bytes(new_key->name, 16)"},
    "ticket_key_scope": {"value": "process", "source": "tool/server.cc Server(): one SSL_CTX for every connection; "
                         "the key lives in the SSL_CTX (ticket_key_current), one for TLS 1.2 and 1.3"},
    "key_rotation_s": {"value": 172800, "source": _BS + "ssl_session.cc ssl_ctx_rotate_ticket_encryption_key(): a "
                       "new key when ticket_key_current->next_rotation_tv_sec (now + "
                       "SSL_DEFAULT_TICKET_KEY_ROTATION_INTERVAL, include/openssl/ssl.h: 2 * 24 * 60 * 60) has "
                       "passed; checked on each ticket issued. Checked under libfaketime at 10000x "
                       "(tests/testbed/test_zoo_tls2.py test_key_rotation_under_faketime)"},
    "key_acceptance_s": {"value": 345600, "source": _BS + "ssl_session.cc ssl_ctx_rotate_ticket_encryption_key(): "
                         "the old key becomes ticket_key_prev with next_rotation_tv_sec += "
                         "SSL_DEFAULT_TICKET_KEY_ROTATION_INTERVAL (decrypts 2 more days)"},
}

RUSTLS_FACTS = {
    "implementation": "rustls 0.23 (ring provider) ServerConfig::builder().with_no_client_auth().with_single_cert(): "
                      "nothing else (testbed/zoo/rustls)",
    "session_ids": {"value": True, "source": _RS + "server/builder.rs: session_storage: ServerSessionMemoryCache::new("
                    "256); server/tls12.rs: 'If we're not offered a ticket or a potential session ID, allocate a "
                    "session ID' (SessionId::random)"},
    "tickets": {"value": True, "source": "TLS 1.3 only, and stateful (tls13_tickets)"},
    "tls12_tickets": {"value": False, "source": _RS + "server/builder.rs: ticketer: NeverProducesTickets; "
                      "server/tls12.rs emits a NewSessionTicket only when config.ticketer.enabled()"},
    "tls13_tickets": {"value": True, "source": _RS + "server/tls13.rs emit_ticket(): without a ticketer the 'ticket' is "
                      "a random 32-byte id stored in session_storage (stateful)"},
    "tls12_lifetime_hint_s": {"value": None, "source": "no TLS 1.2 tickets"},
    "tls13_ticket_lifetime_s": {"value": 86400, "source": _RS + "server/tls13.rs emit_ticket(): 'let "
                                "stateful_lifetime = 24 * 60 * 60; // this is a bit of a punt'"},
    "tls13_ticket_count": {"value": 2, "source": _RS + "server/builder.rs send_tls13_tickets: 2 (ServerConfig docs: "
                           "'2 tickets are sent')"},
    "tls13_ticket_nonce_bytes": {"value": 32, "source": _RS + "server/tls13.rs emit_ticket(): rand::random_vec("
                                 "secure_random, 32)"},
    "tls13_max_early_data": {"value": None, "source": _RS + "server/builder.rs max_early_data_size: 0"},
    "ticket_family": {"value": "unknown", "source": "a stateful 32-byte random id (server/tls13.rs emit_ticket()), no "
                      "layout"},
    "ticket_key_id_len": {"value": 0, "source": "no ticket key (stateful tickets)"},
    "tls13_ticket_len_bytes": {"value": 32, "source": _RS + "server/tls13.rs emit_ticket(): rand::random_vec(.., 32)"},
    "ticket_key_scope": {"value": None, "source": "no ticket key"},
    "key_rotation_s": {"value": None, "source": "no ticket key"},
}

RUSTLS_TICKETS_FACTS = {
    "implementation": "rustls 0.23 (ring) as above plus config.ticketer = rustls::crypto::ring::Ticketer::new() "
                      "(port 8443)",
    "session_ids": {"value": True, "source": _RS + "server/tls12.rs: a session ID is still allocated (session_storage "
                    "can_cache()) unless the client offered a ticket"},
    "tickets": {"value": True, "source": _RS + "crypto/ring/ticketer.rs Ticketer::new()"},
    "tls12_lifetime_hint_s": {"value": 43200, "source": _RS + "ticketer.rs TicketRotator::lifetime(): 'self.lifetime "
                              "* 2' with Ticketer::new()'s 6 * 60 * 60 (doc: 'tickets with a 12 hour life'); "
                              "server/tls12.rs emit_ticket(): ticketer.lifetime()"},
    "tls13_ticket_lifetime_s": {"value": 43200, "source": _RS + "server/tls13.rs emit_ticket(): "
                                "config.ticketer.lifetime() (as TLS 1.2)"},
    "tls13_ticket_count": {"value": 2, "source": _RS + "server/builder.rs send_tls13_tickets: 2"},
    "tls13_ticket_nonce_bytes": {"value": 32, "source": _RS + "server/tls13.rs emit_ticket(): rand::random_vec(.., 32)"},
    "tls13_max_early_data": {"value": None, "source": _RS + "server/builder.rs max_early_data_size: 0 (and 0-RTT "
                             "needs stateful resumption: server/tls13.rs 'early_data_configured = "
                             "config.max_early_data_size > 0 && !config.ticketer.enabled()')"},
    "ticket_family": {"value": "rustls", "source": _RS + "crypto/ring/ticketer.rs AeadTicketer::encrypt(): key_name[16] "
                      "| nonce[12] | ChaCha20-Poly1305(state) + tag[16] (TICKETER_AEAD = CHACHA20_POLY1305)"},
    "ticket_key_id_len": {"value": 16, "source": _RS + "crypto/ring/ticketer.rs AeadTicketer: key_name: [u8; 16]"},
    "ticket_key_scope": {"value": "process", "source": "one ServerConfig (one TicketRotator) for both listeners "
                         "(testbed/zoo/rustls/src/main.rs)"},
    "key_rotation_s": {"value": 21600, "source": _RS + "ticketer.rs TicketRotator::maybe_roll(): current -> previous "
                       "and a new AeadTicketer every 'lifetime' = 6 * 60 * 60 s (crypto/ring/ticketer.rs "
                       "Ticketer::new()), checked on each encrypt/decrypt. Checked under libfaketime at 1000x "
                       "(tests/testbed/test_zoo_tls2.py test_key_rotation_under_faketime)"},
    "key_acceptance_s": {"value": 43200, "source": _RS + "ticketer.rs TicketRotator::decrypt(): the current key, "
                         "then the previous one (dropped at the next switch)"},
}

FACTS = {"h2o": H2O_FACTS, "bssl": BSSL_FACTS, "rustls": RUSTLS_FACTS, "rustls-tickets": RUSTLS_TICKETS_FACTS}
