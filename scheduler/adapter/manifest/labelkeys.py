"""Label keys as Kubernetes checks them (``metav1validation.ValidateLabelName``, i.e.
``content.IsLabelKey`` of k8s.io/apimachinery v0.35, the version Kueue v0.17.0 is built with):
an optional DNS-1123 subdomain prefix and a name, each problem in Kubernetes' exact words
(lengths in bytes, as Go's ``len``)."""

from __future__ import annotations

import re

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                  "alphanumeric character")
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                          "'.', and must start and end with an alphanumeric character")
_LABEL_KEY_RE = re.compile(_LABEL_KEY_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
NAME_MAX_BYTES, PREFIX_MAX_BYTES = 63, 253


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery's ``RegexError`` (its ``', '`` before each ``or`` included)."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    listed = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {listed}regex used for validation is '{fmt}')"


def _dns1123_subdomain_problems(value: str) -> list[str]:
    problems = []
    if len(value.encode()) > PREFIX_MAX_BYTES:
        problems.append(f"must be no more than {PREFIX_MAX_BYTES} bytes")
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        problems.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return problems


def label_key_problems(key: str) -> list[str]:
    """``content.IsLabelKey``: what is wrong with ``key`` as a label key, in its order."""
    parts = key.split("/")
    if len(parts) > 2:
        return ["a valid label key " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    problems = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems += [f"prefix part {p}" for p in _dns1123_subdomain_problems(prefix)]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name.encode()) > NAME_MAX_BYTES:
        problems.append(f"name part must be no more than {NAME_MAX_BYTES} bytes")
    if not _LABEL_KEY_RE.fullmatch(name):
        problems.append("name part " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return problems


def dns1123_subdomain_problems(value: str) -> list[str]:
    """``validation.IsDNS1123Subdomain``: what is wrong with ``value`` as a DNS-1123 subdomain
    (e.g. a label value that names a Kueue object, as Kueue's ``ValidateLabelAsCRDName``)."""
    return _dns1123_subdomain_problems(value)


def is_dns1123_subdomain(value: str) -> list[str]:
    """``validation.IsDNS1123Subdomain`` of k8s.io/apimachinery v0.36 (Kueue v0.19.2's): its
    length limit counts characters (``MaxLenError``), where ``content.IsLabelKey``'s prefix
    check above says bytes."""
    problems = []
    if len(value) > PREFIX_MAX_BYTES:
        problems.append(f"must be no more than {PREFIX_MAX_BYTES} characters")
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        problems.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return problems
