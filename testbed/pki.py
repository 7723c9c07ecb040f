"""The testbed's certificate authority and server certificates (ECDSA P-256)."""
from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _write_key(key, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def ensure_ca(pki_dir: Path) -> tuple[Path, Path]:
    """Create the testbed CA once; returns (ca.pem, ca.key)."""
    pki_dir.mkdir(parents=True, exist_ok=True)
    cert_p, key_p = pki_dir / "ca.pem", pki_dir / "ca.key"
    if cert_p.exists() and key_p.exists():
        return cert_p, key_p
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "netsurvey testbed CA"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "netsurvey testbed")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    _write_key(key, key_p)
    cert_p.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_p, key_p


def issue_cert(pki_dir: Path, label: str, sans: list[str]) -> tuple[Path, Path]:
    """Issue (or reuse, if the SAN list is unchanged) a server certificate; returns (cert, key).

    SAN entries that parse as IP addresses become iPAddress names, the rest dNSName.
    """
    ca_p, ca_key_p = ensure_ca(pki_dir)
    tag = hashlib.sha256("\n".join(sans).encode()).hexdigest()[:12]
    cert_p, key_p = pki_dir / f"{label}-{tag}.pem", pki_dir / f"{label}-{tag}.key"
    if cert_p.exists() and key_p.exists():
        return cert_p, key_p
    ca = x509.load_pem_x509_certificate(ca_p.read_bytes())
    ca_key = serialization.load_pem_private_key(ca_key_p.read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    names = []
    for s in sans:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(s)))
        except ValueError:
            names.append(x509.DNSName(s))
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, sans[0])]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write_key(key, key_p)
    cert_p.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + ca_p.read_bytes())
    return cert_p, key_p


def spki_sha256_b64(cert_path: Path) -> str:
    """base64 SHA-256 of the certificate's SubjectPublicKeyInfo (Chromium's SPKI allow-list format)."""
    import base64

    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()
