"""The container image builds from deploy/image/Containerfile with buildah on a base filesystem
made from Debian packages (mmdebstrap; no image registry is reachable here), and toposched runs
inside it as UID 65532 on a read-only root filesystem, with no installer or compiler on board.

Opt-in (TOPOSCHED_IMAGE_TEST=1, marker ``image``): a cold build takes minutes (base filesystem,
two apt stages, the wheels from PyPI; figures in docs/status.md), too much for every suite run.
With buildah's layer cache warm, a rebuild after a source change takes well under a minute.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.devcluster.binaries import repo_root

pytestmark = [
    pytest.mark.image,
    pytest.mark.skipif(os.environ.get("TOPOSCHED_IMAGE_TEST") != "1",
                       reason="image build is opt-in: TOPOSCHED_IMAGE_TEST=1 (minutes cold)"),
    pytest.mark.skipif(shutil.which("buildah") is None or shutil.which("mmdebstrap") is None,
                       reason="needs buildah and mmdebstrap (apt-get install buildah mmdebstrap)"),
]

IMAGE = "localhost/toposched:image-test"
UID = 65532


def buildah(*args: str, timeout: float = 120) -> str:
    out = subprocess.run(["buildah", *args], capture_output=True, text=True, timeout=timeout, check=False)
    assert out.returncode == 0, f"buildah {' '.join(args)}: {out.stderr}"
    return out.stdout


@pytest.fixture(scope="module")
def image() -> str:
    out = subprocess.run([str(repo_root() / "scripts" / "build-image.sh"), IMAGE], capture_output=True, text=True,
                         timeout=1800, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return IMAGE


@pytest.fixture(scope="module")
def container(image: str) -> Iterator[str]:
    name = f"toposched-image-test-{uuid.uuid4().hex[:8]}"
    buildah("from", "--pull=never", "--name", name, image)
    try:
        yield name
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True, timeout=60, check=False)


def run_in(container: str, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["buildah", "run", "--isolation", "chroot", container, "--", *command],
                          capture_output=True, text=True, timeout=300, check=False)


def test_image_config(image: str) -> None:
    config = json.loads(buildah("inspect", "--type", "image", image))["OCIv1"]["config"]
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ["/opt/toposched/bin/toposched"]
    assert "PYTHONDONTWRITEBYTECODE=1" in config["Env"]


def test_toposched_help_runs_as_non_root(container: str) -> None:
    helped = run_in(container, "toposched", "--help")
    assert helped.returncode == 0, helped.stderr
    for command in ("controller", "webhook", "extender", "place", "explain", "topology"):
        assert command in helped.stdout
    assert run_in(container, "id", "-u").stdout.strip() == str(UID)


def test_no_installer_or_compiler(container: str) -> None:
    probe = run_in(container, "sh", "-c", "for t in pip pip3 gcc cc make apt-get; do command -v $t; done; "
                                          "/opt/toposched/bin/python -m pip --version")
    found = probe.stdout.split()
    assert found == ["/usr/bin/apt-get"], f"only Debian's own apt, no pip or compiler: {found}"
    assert "No module named pip" in probe.stderr


def test_runs_on_a_read_only_root_filesystem(container: str, tmp_path: Path) -> None:
    """The container's root mounted read-only and entered as UID 65532 (what a Pod with
    readOnlyRootFilesystem and the image's USER gets): every command imports and starts."""
    root = buildah("mount", container).strip()
    readonly = tmp_path / "root"
    readonly.mkdir()
    mount = subprocess.run(["mount", "--bind", "-o", "ro", root, str(readonly)], capture_output=True, text=True,
                           check=False)
    if mount.returncode != 0:
        pytest.skip(f"cannot bind-mount read-only here: {mount.stderr.strip()}")
    try:
        before = subprocess.run(["find", root, "-xdev", "-newer", str(tmp_path)], capture_output=True, text=True,
                                check=False).stdout
        chroot = shutil.which("chroot", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") or "chroot"
        for command in ("controller", "webhook", "extender"):
            out = subprocess.run([chroot, f"--userspec={UID}:{UID}", str(readonly), "/opt/toposched/bin/toposched",
                                  command, "--help"], capture_output=True, text=True, timeout=120, check=False,
                                 env={"PATH": "/opt/toposched/bin:/usr/bin:/bin"})
            assert out.returncode == 0, f"{command}: {out.stderr}"
        after = subprocess.run(["find", root, "-xdev", "-newer", str(tmp_path)], capture_output=True, text=True,
                               check=False).stdout
        assert after == before, "nothing written to the image's filesystem"
    finally:
        subprocess.run(["umount", str(readonly)], capture_output=True, check=False)
        subprocess.run(["buildah", "umount", container], capture_output=True, check=False)
