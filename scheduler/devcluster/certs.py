"""The local control plane's certificate files: one CA, serving and client certificates and
the service-account key pair, written once per cluster directory. The certificates are issued
by toposched's one PKI (``scheduler/http/pki.py``); this module only names the files."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from scheduler.http import pki

_VALIDITY = dt.timedelta(days=365)

KeyPair = pki.PairFiles  # a certificate (or public key) file and its private key file


def create_ca(directory: Path, common_name: str = "toposched-local-ca") -> KeyPair:
    return pki.write_pair(pki.issue_ca(_VALIDITY, common_name=common_name), directory, "ca")


def issue(ca: KeyPair, directory: Path, stem: str, common_name: str, *, organizations: tuple[str, ...] = (),
          dns_names: tuple[str, ...] = (), ips: tuple[str, ...] = (), server: bool = False, client: bool = False,
          validity: dt.timedelta = _VALIDITY) -> KeyPair:
    """A leaf certificate signed by the CA in ``ca``'s files, as ``<stem>.crt`` / ``<stem>.key``."""
    leaf = pki.issue_leaf(pki.read_pair(ca), common_name, validity, server=server, client=client,
                          dns_names=dns_names, ips=[ipaddress.ip_address(ip) for ip in ips],
                          organizations=organizations)
    return pki.write_pair(leaf, directory, stem)


def create_service_account_keys(directory: Path) -> KeyPair:
    """The RSA key pair the API server signs and verifies service-account tokens with."""
    return pki.write_rsa_key_pair(directory, "sa")


common_name = pki.common_name_of
