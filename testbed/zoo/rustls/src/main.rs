//! A stock rustls HTTPS server for the netsurvey testbed (issue 24, "TLS zoo 2").
//!
//! `zoo-rustls CERT KEY [--tickets] ADDR:PORT...`: one listener per address, one thread
//! per connection, an answer to every request. The ServerConfig is rustls's default
//! (`ServerConfig::builder()...with_single_cert()`): a 256-entry session cache and
//! rustls's `NeverProducesTickets` ticketer. `--tickets` installs the documented
//! stateless ticketer (`rustls::crypto::ring::Ticketer::new()`), nothing else.
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;
use std::{env, process, thread};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn serve(cfg: Arc<rustls::ServerConfig>, sock: TcpStream) {
    let _ = sock.set_read_timeout(Some(Duration::from_secs(10)));
    let conn = match rustls::ServerConnection::new(cfg) {
        Ok(c) => c,
        Err(_) => return,
    };
    let mut tls = rustls::StreamOwned::new(conn, sock);
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tls.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                req.extend_from_slice(&buf[..n]);
                if req.windows(4).any(|w| w == b"\r\n\r\n") || req.len() > 65536 {
                    break;
                }
            }
        }
    }
    let body = b"zoo-rustls\n";
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = tls.write_all(head.as_bytes());
    let _ = tls.write_all(body);
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

fn main() {
    let args: Vec<String> = env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: zoo-rustls CERT KEY [--tickets] ADDR:PORT...");
        process::exit(2);
    }
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&args[0])
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .unwrap_or_else(|e| {
            eprintln!("zoo-rustls: {}: {e:?}", args[0]);
            process::exit(2)
        });
    let key = PrivateKeyDer::from_pem_file(&args[1]).unwrap_or_else(|e| {
        eprintln!("zoo-rustls: {}: {e:?}", args[1]);
        process::exit(2)
    });
    let mut tickets = false;
    let mut addrs = Vec::new();
    for a in &args[2..] {
        if a == "--tickets" {
            tickets = true;
        } else {
            addrs.push(a.clone());
        }
    }
    let mut cfg = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap_or_else(|e| {
            eprintln!("zoo-rustls: certificate: {e}");
            process::exit(2)
        });
    if tickets {
        cfg.ticketer = rustls::crypto::ring::Ticketer::new().expect("ticketer");
    }
    let cfg = Arc::new(cfg);
    let mut handles = Vec::new();
    for a in addrs {
        let l = TcpListener::bind(&a).unwrap_or_else(|e| {
            eprintln!("zoo-rustls: bind {a}: {e}");
            process::exit(1)
        });
        let cfg = cfg.clone();
        handles.push(thread::spawn(move || {
            for s in l.incoming().flatten() {
                let cfg = cfg.clone();
                thread::spawn(move || serve(cfg, s));
            }
        }));
    }
    for h in handles {
        let _ = h.join();
    }
}
