"""Render the HTML page in headless Chromium and check the screenshot is a real, readable page.

Skipped only when Chromium is not installed (Debian package ``chromium``; CI installs it).
The PNG is decoded with a small pure-Python decoder (zlib + PNG row filters), no Pillow.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from scheduler.core.fakecluster import generate_nodes
from scheduler.core.nodes import node_from_k8s, pod_from_k8s
from scheduler.topoview import build_view, render_html

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium") or "",
                             shutil.which("chromium-browser") or "") if p and os.access(p, os.X_OK)), None)
WIDTH, HEIGHT = 1400, 900

HEALTHY_FILL = (0xE6, 0xF4, 0xE4)
UNHEALTHY_FILL = (0xFD, 0xE2, 0xDF)
UNAVAILABLE_FILL = (0xFF, 0xF1, 0xD6)
GPU_USED = (0x1E, 0x5F, 0xBF)


def decode_png_rows(data: bytes, max_rows: int) -> tuple[int, int, list[bytes], int]:
    """(width, height, first max_rows unfiltered rows, bytes per pixel) of an 8-bit RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, bytearray()
    width = height = bpp = 0
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(bytes(idat))
    stride = width * bpp
    assert len(raw) == height * (stride + 1), "truncated image data"
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(min(height, max_rows)):
        start = y * (stride + 1)
        ftype, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif ftype == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev, strict=True))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        else:
            assert ftype == 0, f"bad filter {ftype}"
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def sample_cluster_html() -> str:
    description = {
        "name": "screenshot", "instanceType": "ml.p5.48xlarge", "layers": [1, 2, 2], "nodesPerDomain": 4,
        "nodes": [
            {"index": 2, "labels": {
                "sagemaker.amazonaws.com/node-health-status": "UnschedulablePendingReplacement",
                "sagemaker.amazonaws.com/fault-types": "NvidiaErrorReboot"}},
            {"index": 6, "unschedulable": True},
        ],
    }
    raw = generate_nodes(description)
    pods = []
    for i, node in enumerate(raw[:6]):
        gpus = "8" if i < 4 else "3"
        pods.append({"metadata": {"name": f"llama-{i}", "namespace": "hyperpod-ns-team-a",
                                  "labels": {"job-name": "llama-70b"}},
                     "spec": {"nodeName": node["metadata"]["name"], "containers": [
                         {"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus}}}]},
                     "status": {"phase": "Running"}})
    view = build_view([node_from_k8s(n) for n in raw], [pod_from_k8s(p) for p in pods])
    return render_html(view, title="screenshot test cluster")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_html_screenshot_is_a_readable_page(tmp_path: Path) -> None:
    page = tmp_path / "topology.html"
    page.write_text(sample_cluster_html())
    png = tmp_path / "topology.png"
    profile = tmp_path / "profile"
    profile.mkdir()
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={WIDTH},{HEIGHT}",
           page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "HOME": str(tmp_path)})
    assert png.exists(), f"no screenshot (exit {proc.returncode}): {proc.stderr[-800:]}"
    keep = os.environ.get("TOPOSCHED_SCREENSHOT_DIR")  # to look at it: CI artifact / by hand
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(keep) / "topology.png")
    width, height, rows, bpp = decode_png_rows(png.read_bytes(), max_rows=520)
    assert (width, height) == (WIDTH, HEIGHT)
    colours: dict[tuple[int, ...], int] = {}
    for row in rows[::2]:
        for x in range(0, width * bpp, bpp * 2):
            px = tuple(row[x:x + 3])
            colours[px] = colours.get(px, 0) + 1
    total = sum(colours.values())
    white = colours.get((255, 255, 255), 0)
    assert len(colours) > 50, f"only {len(colours)} colours: blank page?"
    assert white < 0.9 * total, "page is (almost) all white"
    for name, rgb in [("healthy tile", HEALTHY_FILL), ("unhealthy tile", UNHEALTHY_FILL),
                      ("cordoned tile", UNAVAILABLE_FILL), ("GPU used segment", GPU_USED)]:
        assert colours.get(rgb, 0) > 20, f"{name} colour {rgb} not visible in the screenshot"
