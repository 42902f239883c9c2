"""``--kueue-config FILE`` and ``--kueue-version``: the admin's Kueue Configuration and the Kueue
release toposched behaves as, shared by `controller`, `webhook`, `place`, `explain`, `simulate`
and `dev up` (``scheduler.adapter.kueue_config`` reads the file; docs/kueue-versions.md)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scheduler.adapter.files import read_text
from scheduler.adapter.kueue_config import ConfigError, LoadedConfig, load_kueue_config_text
from scheduler.core.config import DEFAULT_KUEUE_RELEASE, KUEUE_RELEASES, KueueConfig, kueue_defaults, kueue_release
from scheduler.errors import UserError

log = logging.getLogger("toposched.config")


def release_argument(text: str) -> str:
    """argparse ``type`` of ``--kueue-version``: one readable line (exit 2) on a bad value."""
    try:
        return kueue_release(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_kueue_version_argument(parser: Any) -> None:
    choices = ", ".join(f"{k} ({v})" for k, v in KUEUE_RELEASES.items())
    parser.add_argument("--kueue-version", type=release_argument, metavar="VERSION", default=DEFAULT_KUEUE_RELEASE,
                        help=f"the Kueue release toposched behaves as: {choices}; default {DEFAULT_KUEUE_RELEASE}. "
                             "It sets every feature-gate default and the Configuration's defaults "
                             "(v0.19: waitForPodsReady on, 30m); featureGates in --kueue-config still override "
                             "(docs/kueue-versions.md)")


def add_kueue_config_argument(parser: Any) -> None:
    parser.add_argument("--kueue-config", type=Path, metavar="FILE", default=None,
                        help="Kueue's Configuration file (config.kueue.x-k8s.io/v1beta2, the file Kueue runs with): "
                             "featureGates, fairSharing, admissionFairSharing, waitForPodsReady, "
                             "integrations.frameworks are honoured; other fields are reported at start-up")
    add_kueue_version_argument(parser)


def read_kueue_config(path: Path | None, release: str = DEFAULT_KUEUE_RELEASE) -> LoadedConfig | None:
    """The file at ``path`` read as Kueue ``release`` reads it (None: no file, Kueue's
    defaults). Exit 2 with one line if it is bad."""
    if path is None:
        return None
    text = read_text(path, "--kueue-config")  # the CLI's bounded reader: /dev/zero ends at once
    try:
        return load_kueue_config_text(text, f"--kueue-config {path}", release)
    except ConfigError as exc:
        raise UserError(str(exc)) from exc


def kueue_config(args: Any, unmanaged: Callable[[Sequence[str]], Sequence[str]] | None = None) -> KueueConfig:
    """Read ``args.kueue_config`` and report, once, what in it toposched does not honour.
    ``unmanaged``: of ``integrations.frameworks``, those toposched has no integration for."""
    release = getattr(args, "kueue_version", None) or DEFAULT_KUEUE_RELEASE
    loaded = read_kueue_config(getattr(args, "kueue_config", None), release)
    if loaded is None:
        return kueue_defaults(release)
    for line in loaded.report():
        log.warning("%s", line)
    missing = unmanaged(loaded.config.frameworks) if unmanaged else ()
    if missing:
        log.warning("Kueue Configuration: integrations.frameworks without a toposched integration (their jobs "
                    "are not managed): %s", ", ".join(missing))
    log.info("Kueue Configuration %s, read as Kueue %s: fairSharing %s, admissionFairSharing %s, waitForPodsReady %s",
             args.kueue_config, KUEUE_RELEASES[release], _on(loaded.config.fair_sharing.enabled),
             _on(loaded.config.admission_fair_sharing.enabled), _on(loaded.config.wait_for_pods_ready.enabled))
    return loaded.config


def _on(flag: bool) -> str:
    return "on" if flag else "off"
