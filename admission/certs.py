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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
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


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _not_after(cert: x509.Certificate) -> dt.datetime:
    return cert.not_valid_after_utc


def _not_before(cert: x509.Certificate) -> dt.datetime:
    return cert.not_valid_before_utc


def due(cert: x509.Certificate, fraction: float, now: dt.datetime | None = None) -> bool:
    """True once ``fraction`` of the certificate's validity has passed."""
    now = now or _now()
    start, end = _not_before(cert), _not_after(cert)
    return now >= start + (end - start) * fraction


@dataclass
class Pair:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


class CertManager:
    def __init__(self, cert_dir: Path, dns_names: Sequence[str], ip_addresses: Sequence[str] = (),
                 ca_validity: dt.timedelta = 365 * DAY, cert_validity: dt.timedelta = 90 * DAY,
                 rotate_fraction: float = 2 / 3) -> None:
        self.dir = Path(cert_dir)
        self.dns_names = list(dns_names)
        self.ips = [ipaddress.ip_address(ip) for ip in ip_addresses]
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
        self.previous_cas = [c for c in bundle if self.ca is None or c != self.ca.cert and _not_after(c) > now]

    # ---- issuing ------------------------------------------------------------------------
    def _new_ca(self) -> Pair:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"toposched-webhook-ca-{_now():%Y%m%d%H%M%S}")])
        now = _now()
        cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + self.ca_validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return Pair(cert, key)

    def _new_serving(self, ca: Pair) -> Pair:
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        # Never outlive the CA that signs it.
        not_after = min(now + self.cert_validity, _not_after(ca.cert))
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in self.dns_names]
        sans += [x509.IPAddress(ip) for ip in self.ips]
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, self.dns_names[0] if self.dns_names
                                                        else "toposched-webhook")]))
            .issuer_name(ca.cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
            .sign(ca.key, hashes.SHA256())
        )
        return Pair(cert, key)

    def _sans_match(self, cert: x509.Certificate) -> bool:
        try:
            ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return False
        return set(ext.get_values_for_type(x509.DNSName)) == set(self.dns_names) and \
            set(ext.get_values_for_type(x509.IPAddress)) == set(self.ips)

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
            _write(self.dir / "ca.key", _key_pem(self.ca.key), private=True)
            _write(self.dir / "ca.crt", _cert_pem(self.ca.cert))
            changed = True
        when = now or _now()
        self.previous_cas = [c for c in self.previous_cas if _not_after(c) > when]
        s = self.serving
        if (changed or s is None or due(s.cert, self.rotate_fraction, now) or not self._sans_match(s.cert)
                or s.cert.issuer != self.ca.cert.subject):
            self.serving = self._new_serving(self.ca)
            _write(self.key_file, _key_pem(self.serving.key), private=True)
            _write(self.cert_file, _cert_pem(self.serving.cert))
            log.info("issued serving certificate valid until %s", _not_after(self.serving.cert).isoformat())
            changed = True
        bundle = self.ca_bundle()
        if not self.ca_bundle_file.exists() or self.ca_bundle_file.read_bytes() != bundle:
            _write(self.ca_bundle_file, bundle)
            changed = True
        return changed

    def ca_bundle(self) -> bytes:
        """PEM of the current CA followed by still-valid previous CAs (for the caBundle field)."""
        assert self.ca is not None
        return b"".join([_cert_pem(self.ca.cert)] + [_cert_pem(c) for c in self.previous_cas])

    def next_check(self, now: dt.datetime | None = None) -> float:
        """Seconds until the earliest rotation point (at least 1 s)."""
        assert self.ca is not None and self.serving is not None
        now = now or _now()
        points = []
        for cert in (self.ca.cert, self.serving.cert):
            start, end = _not_before(cert), _not_after(cert)
            points.append(start + (end - start) * self.rotate_fraction)
        return max(1.0, (min(points) - now).total_seconds())

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        self.load_into(ctx)
        return ctx

    def load_into(self, ctx: ssl.SSLContext) -> None:
        ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
