//! A stock quinn QUIC server for the netsurvey QUIC zoo (issue 24).
//!
//! `zoo-quinn CERT KEY ADDR:PORT...`: one quinn Endpoint per address, all with one
//! `quinn::ServerConfig` (so one token key and one rustls session cache per process).
//!
//! Stock defaults: the rustls config is exactly what quinn's own
//! `ServerConfig::with_single_cert()` builds (quinn-proto 0.11.19 src/crypto/rustls.rs
//! `QuicServerConfig::inner()`: ring provider, TLS 1.3 only, no client auth, one cert,
//! `max_early_data_size = u32::MAX`) plus the one thing every application sets, its ALPN
//! (`h3`; `inner()` is crate-private, so it is rebuilt here). quinn's `ServerConfig`,
//! `TransportConfig` and `ValidationTokenConfig` are untouched; every `Incoming` is
//! accepted as it comes (`incoming.await`: no `retry()`, as in quinn's example server
//! without `--stateless-retry`).
//!
//! Application: a minimal HTTP/3 responder (RFC 9114) written out by hand instead of the
//! `h3` crate (build time): a control stream with an empty SETTINGS frame, and on every
//! request stream a `:status 200` HEADERS frame (QPACK static index 25) and a DATA frame.
use std::net::SocketAddr;
use std::sync::Arc;
use std::{env, process};

use quinn::crypto::rustls::QuicServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

const BODY: &[u8] = b"zoo-quinn\n";

fn die(msg: String) -> ! {
    eprintln!("zoo-quinn: {msg}");
    process::exit(2)
}

async fn request(mut send: quinn::SendStream, mut recv: quinn::RecvStream) {
    // the GET's HEADERS frame (and FIN); its content does not matter
    if recv.read_to_end(64 * 1024).await.is_err() {
        return;
    }
    // HEADERS: type 0x01, length 3, QPACK prefix (0, 0), indexed static field 25 (:status 200)
    let mut out = vec![0x01, 0x03, 0x00, 0x00, 0xC0 | 25];
    out.extend_from_slice(&[0x00, BODY.len() as u8]);
    out.extend_from_slice(BODY);
    if send.write_all(&out).await.is_ok() {
        let _ = send.finish();
    }
}

async fn connection(incoming: quinn::Incoming) {
    let conn = match incoming.await {
        Ok(c) => c,
        Err(_) => return,
    };
    // control stream: stream type 0x00, SETTINGS frame (0x04) of length 0; kept open
    let mut control = match conn.open_uni().await {
        Ok(s) => s,
        Err(_) => return,
    };
    if control.write_all(&[0x00, 0x04, 0x00]).await.is_err() {
        return;
    }
    while let Ok((send, recv)) = conn.accept_bi().await {
        tokio::spawn(request(send, recv));
    }
    drop(control);
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = env::args().skip(1).collect();
    if args.len() < 3 {
        die("usage: zoo-quinn CERT KEY ADDR:PORT...".into());
    }
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&args[0])
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .unwrap_or_else(|e| die(format!("{}: {e:?}", args[0])));
    let key = PrivateKeyDer::from_pem_file(&args[1]).unwrap_or_else(|e| die(format!("{}: {e:?}", args[1])));
    // = quinn-proto QuicServerConfig::inner() + ALPN
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap_or_else(|e| die(format!("TLS 1.3: {e}")))
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap_or_else(|e| die(format!("certificate: {e}")));
    tls.max_early_data_size = u32::MAX;
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = QuicServerConfig::try_from(tls).unwrap_or_else(|e| die(format!("QUIC TLS config: {e}")));
    let cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut tasks = Vec::new();
    for a in &args[2..] {
        let addr: SocketAddr = a.parse().unwrap_or_else(|_| die(format!("bad address {a:?}")));
        let ep = quinn::Endpoint::server(cfg.clone(), addr).unwrap_or_else(|e| die(format!("{addr}: {e}")));
        tasks.push(tokio::spawn(async move {
            while let Some(incoming) = ep.accept().await {
                tokio::spawn(connection(incoming));
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}
