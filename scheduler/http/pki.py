"""toposched's one PKI: ECDSA P-256 certificate authorities and leaf certificates (serving,
client, or both), PEM encoding, checks (issuer, SANs, validity) and TLS server contexts. The
webhook's self-managed certificates (``admission/certs.py``), the extender's and gRPC's client
certificates (``scheduler/extender/tls.py``) and the local control plane's files
(``scheduler/devcluster/certs.py``) are all issued here.

Uses the ``cryptography`` package.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAY = dt.timedelta(days=1)


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def write_file(path: Path, data: bytes, private: bool = False) -> None:
    """Write atomically (a temporary file moved into place); ``private``: mode 0600."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    if private:
        os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def not_after(cert: x509.Certificate) -> dt.datetime:
    return cert.not_valid_after_utc


def not_before(cert: x509.Certificate) -> dt.datetime:
    return cert.not_valid_before_utc


def due(cert: x509.Certificate, fraction: float, now: dt.datetime | None = None) -> bool:
    """True once ``fraction`` of the certificate's validity has passed."""
    now = now or now_utc()
    start, end = not_before(cert), not_after(cert)
    return now >= start + (end - start) * fraction


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Pair:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def issue_ca(validity: dt.timedelta, now: dt.datetime | None = None, purpose: str = "webhook",
             common_name: str | None = None) -> Pair:
    """A self-signed CA (ECDSA P-256) valid from 5 minutes ago (clock skew) for ``validity``;
    named ``toposched-<purpose>-ca-<time>`` unless ``common_name`` is given."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = now or now_utc()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                         common_name or f"toposched-{purpose}-ca-{now:%Y%m%d%H%M%S}")])
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Pair(cert, key)


def issue_leaf(ca: Pair, common_name: str, validity: dt.timedelta, *, server: bool = False, client: bool = False,
               dns_names: Sequence[str] = (), ips: Sequence[IPAddress] = (), organizations: Sequence[str] = (),
               now: dt.datetime | None = None) -> Pair:
    """A leaf certificate signed by ``ca`` for TLS server and/or client authentication, with
    the subject alternative names given; never outlives the CA. ``organizations``: the
    subject's O, which the API server reads as the holder's groups."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = now or now_utc()
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] * server + [ExtendedKeyUsageOID.CLIENT_AUTH] * client
    builder = (
        x509.CertificateBuilder().subject_name(x509.Name(attrs))
        .issuer_name(ca.cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(min(now + validity, not_after(ca.cert)))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
    )
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ip) for ip in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return Pair(builder.sign(ca.key, hashes.SHA256()), key)


def issue_serving(ca: Pair, dns_names: Sequence[str], ips: Sequence[IPAddress], validity: dt.timedelta,
                  now: dt.datetime | None = None) -> Pair:
    """A serving certificate signed by ``ca`` for ``dns_names`` and ``ips``; never outlives the CA."""
    return issue_leaf(ca, dns_names[0] if dns_names else "toposched-webhook", validity, server=True,
                      dns_names=dns_names, ips=ips, now=now)


def issue_client(ca: Pair, common_name: str, validity: dt.timedelta, now: dt.datetime | None = None) -> Pair:
    """A client certificate (TLS client authentication) signed by ``ca``; never outlives the CA."""
    return issue_leaf(ca, common_name, validity, client=True, now=now)


def sans_match(cert: x509.Certificate, dns_names: Sequence[str], ips: Sequence[IPAddress]) -> bool:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return set(ext.get_values_for_type(x509.DNSName)) == set(dns_names) and \
        set(ext.get_values_for_type(x509.IPAddress)) == set(ips)


def load_pair(cert_data: bytes, key_data: bytes) -> Pair:
    """Parse a PEM certificate and its PEM private key (ValueError when either is not one)."""
    key = serialization.load_pem_private_key(key_data, None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the private key is not an ECDSA key")
    return Pair(x509.load_pem_x509_certificate(cert_data), key)


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """True when ``ca`` issued ``cert`` (name and signature), the check a TLS client makes."""
    if cert.issuer != ca.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def tls_server_context() -> ssl.SSLContext:
    """An empty TLS >= 1.2 server context; a certificate source loads its chain into it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def load_chain_pem(ctx: ssl.SSLContext, cert_data: bytes, key_data: bytes) -> None:
    """Load an in-memory certificate + key into ``ctx`` (ssl reads only files: a private temp dir)."""
    with tempfile.TemporaryDirectory(prefix="toposched-tls-") as tmp:
        cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert_file.write_bytes(cert_data)
        key_file.write_bytes(key_data)
        os.chmod(key_file, 0o600)
        ctx.load_cert_chain(str(cert_file), str(key_file))




# ---- files: a pair as two PEM files (the local control plane's layout) ----------------------
@dataclass(frozen=True)
class PairFiles:
    cert: Path
    key: Path


def write_pair(pair: Pair, directory: Path, stem: str) -> PairFiles:
    """``<stem>.crt`` and ``<stem>.key`` (mode 0600) in ``directory``."""
    files = PairFiles(directory / f"{stem}.crt", directory / f"{stem}.key")
    write_file(files.cert, cert_pem(pair.cert))
    write_file(files.key, key_pem(pair.key), private=True)
    return files


def read_pair(files: PairFiles) -> Pair:
    return load_pair(files.cert.read_bytes(), files.key.read_bytes())


def write_rsa_key_pair(directory: Path, stem: str) -> PairFiles:
    """An RSA 2048 key pair as ``<stem>.pub`` and ``<stem>.key`` (what the API server signs and
    verifies service-account tokens with; ECDSA would do too, RSA is what every client expects)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files = PairFiles(directory / f"{stem}.pub", directory / f"{stem}.key")
    write_file(files.cert, key.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))
    write_file(files.key, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()), private=True)
    return files


def common_name_of(cert_file: Path) -> str:
    """The subject CN of a PEM certificate file: the username the API server gives its holder."""
    names = x509.load_pem_x509_certificate(cert_file.read_bytes()).subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""
