"""The local cluster's toposched controller has a user of its own, as a ServiceAccount in a real
cluster: the webhooks skip that user's writes (``matchConditions``) and let only it unsuspend a
queued job, so the admin's kubectl (the demo's, the tests') must be another user, or every job an
admin creates passes the job webhooks unread."""

from __future__ import annotations

from pathlib import Path

import yaml

from scheduler.devcluster import certs
from scheduler.devcluster.controlplane import CONTROLLER_USER, LocalCluster


def test_the_controller_and_the_admin_are_different_users(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path)
    cluster._write_pki()
    cluster._write_kubeconfigs()
    assert certs.common_name(cluster.pki / "controller.crt") == CONTROLLER_USER
    assert certs.common_name(cluster.pki / "admin.crt") != CONTROLLER_USER
    kubeconfig = yaml.safe_load(cluster.controller_kubeconfig.read_text())
    assert kubeconfig["users"][0]["user"]["client-certificate"].endswith("controller.crt")


def test_a_cluster_directory_from_before_gets_the_controller_user(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path)
    cluster._write_pki()
    (cluster.pki / "controller.crt").unlink()
    cluster._write_pki()
    assert certs.common_name(cluster.pki / "controller.crt") == CONTROLLER_USER
