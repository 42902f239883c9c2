"""Self-signed CA + serving cert: creation, reuse across restarts, rotation at 2/3 of validity."""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

from cryptography import x509

from admission.certs import CertManager


def mgr(tmp_path: Path, **kw: object) -> CertManager:
    return CertManager(tmp_path, ["toposched-webhook.toposched-system.svc", "localhost"], ["127.0.0.1"], **kw)  # type: ignore[arg-type]


def test_create_then_reuse(tmp_path: Path) -> None:
    m = mgr(tmp_path)
    assert m.ensure() is True
    serving = m.cert_file.read_bytes()
    again = mgr(tmp_path)
    assert again.ensure() is False  # restarted webhook keeps CA and cert
    assert m.cert_file.read_bytes() == serving
    cert = x509.load_pem_x509_certificate(serving)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    # the bundle verifies the serving certificate
    ctx = ssl.create_default_context(cadata=m.ca_bundle().decode())
    assert ctx.get_ca_certs()


def test_serving_cert_rotates_at_two_thirds(tmp_path: Path) -> None:
    m = mgr(tmp_path, cert_validity=dt.timedelta(days=3))
    m.ensure()
    first = m.serving.cert  # type: ignore[union-attr]
    now = dt.datetime.now(dt.UTC)
    assert m.ensure(now + dt.timedelta(days=1)) is False
    assert m.ensure(now + dt.timedelta(days=2, hours=1)) is True
    assert m.serving.cert != first  # type: ignore[union-attr]
    assert m.serving.cert.issuer == first.issuer  # type: ignore[union-attr]  # same CA


def test_ca_rotation_keeps_old_ca_in_bundle(tmp_path: Path) -> None:
    m = mgr(tmp_path, ca_validity=dt.timedelta(days=30), cert_validity=dt.timedelta(days=10))
    m.ensure()
    old_ca = m.ca.cert  # type: ignore[union-attr]
    assert m.ensure(dt.datetime.now(dt.UTC) + dt.timedelta(days=21)) is True
    assert m.ca.cert != old_ca  # type: ignore[union-attr]
    bundle = x509.load_pem_x509_certificates(m.ca_bundle())
    assert bundle[0] == m.ca.cert and old_ca in bundle  # type: ignore[union-attr]
    assert m.serving.cert.issuer == m.ca.cert.subject  # type: ignore[union-attr]


def test_new_sans_reissue(tmp_path: Path) -> None:
    first = mgr(tmp_path)
    first.ensure()
    other = CertManager(tmp_path, ["other.svc"], ["127.0.0.1"])
    assert other.ensure() is True  # SANs changed: new serving cert
    assert other.ca.cert == first.ca.cert  # type: ignore[union-attr]  # same CA: caBundle stays valid
