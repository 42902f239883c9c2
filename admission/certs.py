"""Self-signed CA and serving certificate for the webhook, rotated before they expire.

* The CA (default validity 1 year) and the serving certificate (default 90 days) are
  written to ``--cert-dir`` as ``ca.crt``/``ca.key`` and ``tls.crt``/``tls.key``, so a restarted
  webhook keeps its CA (and the caBundle already in the webhook configurations stays valid).
* Each is renewed when 2/3 of its validity has passed (``rotate_fraction``). A new serving
  certificate is loaded into the live ``SSLContext``: new TLS handshakes get it, no restart.
* A renewed CA is published *next to* the previous one (``ca-bundle.crt`` holds both until the
  old one expires), so the API server trusts the serving certificate during the switch.

Uses the ``cryptography`` package; ECDSA P-256 keys.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = logging.getLogger(__name__)

DAY = dt.timedelta(days=1)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _write(path: Path, data: bytes, private: bool = False) -> None:
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
    now = now or _now()
    start, end = not_before(cert), not_after(cert)
    return now >= start + (end - start) * fraction


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Pair:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def issue_ca(validity: dt.timedelta, now: dt.datetime | None = None, purpose: str = "webhook") -> Pair:
    """A self-signed CA (ECDSA P-256) valid from 5 minutes ago (clock skew) for ``validity``."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = now or _now()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"toposched-{purpose}-ca-{now:%Y%m%d%H%M%S}")])
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


def issue_serving(ca: Pair, dns_names: Sequence[str], ips: Sequence[IPAddress], validity: dt.timedelta,
                  now: dt.datetime | None = None) -> Pair:
    """A serving certificate signed by ``ca`` for ``dns_names`` and ``ips``; never outlives the CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = now or _now()
    until = min(now + validity, not_after(ca.cert))
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ip) for ip in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0] if dns_names
                                                    else "toposched-webhook")]))
        .issuer_name(ca.cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return Pair(cert, key)


def issue_client(ca: Pair, common_name: str, validity: dt.timedelta, now: dt.datetime | None = None) -> Pair:
    """A client certificate (TLS client authentication) signed by ``ca``; never outlives the CA."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = now or _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(min(now + validity, not_after(ca.cert)))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    return Pair(cert, key)


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


class CertManager:
    def __init__(self, cert_dir: Path, dns_names: Sequence[str], ip_addresses: Sequence[str] = (),
                 ca_validity: dt.timedelta = 365 * DAY, cert_validity: dt.timedelta = 90 * DAY,
                 rotate_fraction: float = 2 / 3) -> None:
        self.dir = Path(cert_dir)
        self.dns_names = list(dns_names)
        self.ips: list[IPAddress] = [ipaddress.ip_address(ip) for ip in ip_addresses]
        self.ca_validity = ca_validity
        self.cert_validity = cert_validity
        self.rotate_fraction = rotate_fraction
        self.ca: Pair | None = None
        self.serving: Pair | None = None
        self.previous_cas: list[x509.Certificate] = []

    # ---- files ------------------------------------------------------------------------
    @property
    def cert_file(self) -> Path:
        return self.dir / "tls.crt"

    @property
    def key_file(self) -> Path:
        return self.dir / "tls.key"

    @property
    def ca_bundle_file(self) -> Path:
        return self.dir / "ca-bundle.crt"

    def _load(self) -> None:
        try:
            self.ca = Pair(x509.load_pem_x509_certificate((self.dir / "ca.crt").read_bytes()),
                           serialization.load_pem_private_key((self.dir / "ca.key").read_bytes(), None))  # type: ignore[arg-type]
        except (OSError, ValueError):
            self.ca = None
        try:
            self.serving = Pair(x509.load_pem_x509_certificate(self.cert_file.read_bytes()),
                                serialization.load_pem_private_key(self.key_file.read_bytes(), None))  # type: ignore[arg-type]
        except (OSError, ValueError):
            self.serving = None
        try:
            bundle = x509.load_pem_x509_certificates(self.ca_bundle_file.read_bytes())
        except (OSError, ValueError):
            bundle = []
        now = _now()
        self.previous_cas = [c for c in bundle if self.ca is None or c != self.ca.cert and not_after(c) > now]

    # ---- issuing ------------------------------------------------------------------------
    def _new_ca(self) -> Pair:
        return issue_ca(self.ca_validity)

    def _new_serving(self, ca: Pair) -> Pair:
        return issue_serving(ca, self.dns_names, self.ips, self.cert_validity)

    def _sans_match(self, cert: x509.Certificate) -> bool:
        return sans_match(cert, self.dns_names, self.ips)

    def ensure(self, now: dt.datetime | None = None) -> bool:
        """Load, create or renew as needed. Returns True when anything changed (reload + re-publish)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.ca is None:
            self._load()
        changed = False
        if self.ca is None or due(self.ca.cert, self.rotate_fraction, now):
            if self.ca is not None:
                self.previous_cas.append(self.ca.cert)
                log.info("CA %s is due for rotation; issuing a new one", self.ca.cert.subject.rfc4514_string())
            self.ca = self._new_ca()
            _write(self.dir / "ca.key", key_pem(self.ca.key), private=True)
            _write(self.dir / "ca.crt", cert_pem(self.ca.cert))
            changed = True
        when = now or _now()
        self.previous_cas = [c for c in self.previous_cas if not_after(c) > when]
        s = self.serving
        if (changed or s is None or due(s.cert, self.rotate_fraction, now) or not self._sans_match(s.cert)
                or s.cert.issuer != self.ca.cert.subject):
            self.serving = self._new_serving(self.ca)
            _write(self.key_file, key_pem(self.serving.key), private=True)
            _write(self.cert_file, cert_pem(self.serving.cert))
            log.info("issued serving certificate valid until %s", not_after(self.serving.cert).isoformat())
            changed = True
        bundle = self.ca_bundle()
        if not self.ca_bundle_file.exists() or self.ca_bundle_file.read_bytes() != bundle:
            _write(self.ca_bundle_file, bundle)
            changed = True
        return changed

    def ca_bundle(self) -> bytes:
        """PEM of the current CA followed by still-valid previous CAs (for the caBundle field)."""
        assert self.ca is not None
        return b"".join([cert_pem(self.ca.cert)] + [cert_pem(c) for c in self.previous_cas])

    def next_check(self, now: dt.datetime | None = None) -> float:
        """Seconds until the earliest rotation point (at least 1 s)."""
        assert self.ca is not None and self.serving is not None
        now = now or _now()
        points = []
        for cert in (self.ca.cert, self.serving.cert):
            start, end = not_before(cert), not_after(cert)
            points.append(start + (end - start) * self.rotate_fraction)
        return max(1.0, (min(points) - now).total_seconds())

    def server_context(self) -> ssl.SSLContext:
        ctx = tls_server_context()
        self.load_into(ctx)
        return ctx

    def load_into(self, ctx: ssl.SSLContext) -> None:
        ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
