"""``--kueue-config FILE``: the admin's Kueue Configuration, shared by `controller`, `explain`
and `simulate` (``scheduler.adapter.kueue_config`` reads it)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scheduler.adapter.files import read_text
from scheduler.adapter.kueue_config import ConfigError, LoadedConfig, load_kueue_config_text
from scheduler.core.config import KUEUE_DEFAULTS, KueueConfig
from scheduler.errors import UserError

log = logging.getLogger("toposched.config")


def add_kueue_config_argument(parser: Any) -> None:
    parser.add_argument("--kueue-config", type=Path, metavar="FILE", default=None,
                        help="Kueue's Configuration file (config.kueue.x-k8s.io/v1beta2, the file Kueue runs with): "
                             "featureGates, fairSharing, admissionFairSharing, waitForPodsReady, "
                             "integrations.frameworks are honoured; other fields are reported at start-up")


def read_kueue_config(path: Path | None) -> LoadedConfig | None:
    """The file at ``path`` (None: no file, Kueue's defaults). Exit 2 with one line if it is bad."""
    if path is None:
        return None
    text = read_text(path, "--kueue-config")  # the CLI's bounded reader: /dev/zero ends at once
    try:
        return load_kueue_config_text(text, f"--kueue-config {path}")
    except ConfigError as exc:
        raise UserError(str(exc)) from exc


def kueue_config(args: Any, unmanaged: Callable[[Sequence[str]], Sequence[str]] | None = None) -> KueueConfig:
    """Read ``args.kueue_config`` and report, once, what in it toposched does not honour.
    ``unmanaged``: of ``integrations.frameworks``, those toposched has no integration for."""
    loaded = read_kueue_config(getattr(args, "kueue_config", None))
    if loaded is None:
        return KUEUE_DEFAULTS
    for line in loaded.report():
        log.warning("%s", line)
    missing = unmanaged(loaded.config.frameworks) if unmanaged else ()
    if missing:
        log.warning("Kueue Configuration: integrations.frameworks without a toposched integration (their jobs "
                    "are not managed): %s", ", ".join(missing))
    log.info("Kueue Configuration %s: fairSharing %s, admissionFairSharing %s, waitForPodsReady %s",
             args.kueue_config, _on(loaded.config.fair_sharing.enabled),
             _on(loaded.config.admission_fair_sharing.enabled), _on(loaded.config.wait_for_pods_ready.enabled))
    return loaded.config


def _on(flag: bool) -> str:
    return "on" if flag else "off"
