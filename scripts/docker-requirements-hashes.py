"""Write the sha256 of every pinned distribution into docker/requirements.txt and
docker/build-requirements.txt, so that the Dockerfile's `pip --require-hashes` accepts exactly
those files and nothing else.

    .venv/bin/python scripts/docker-requirements-hashes.py

For each `name==version` line (hashes already there are dropped and made again), pip downloads
the wheels the image can use, from the index pip is configured with, for each platform below
and the Python of the Dockerfile's BASE_IMAGE; each line then lists the sha256 of every file
(what `pip hash` prints). The comment at the top of each file is kept. Run it after changing a
pin; a different index serving other files for the same versions shows up as a hash mismatch
at the next build.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "docker" / "requirements.txt", ROOT / "docker" / "build-requirements.txt"]
# The image's platforms: amd64 and arm64 hosts, glibc (Debian).
PLATFORMS = {
    "x86_64": ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
               "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_5_x86_64",
               "manylinux1_x86_64"],
    "aarch64": ["manylinux_2_28_aarch64", "manylinux_2_27_aarch64", "manylinux_2_26_aarch64",
                "manylinux_2_24_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"],
}
PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s\\;]+)")


def python_version() -> str:
    dockerfile = (ROOT / "Dockerfile").read_text()
    match = re.search(r"^ARG BASE_IMAGE=python:(\d+)\.(\d+)\.\d+", dockerfile, re.M)
    assert match, "Dockerfile has no ARG BASE_IMAGE=python:X.Y.Z... line"
    return f"{match.group(1)}.{match.group(2)}"


def split(path: Path) -> tuple[list[str], list[str]]:
    """(the comment lines at the top, the `name==version` pins)."""
    header, pins = [], []
    for line in path.read_text().splitlines():
        if line.startswith("#") and not pins:
            header.append(line)
        elif match := PIN.match(line):
            pins.append(f"{match.group(1)}=={match.group(2)}")
    return header, pins


def download(pins: list[str], platforms: list[str], py: str, dest: Path) -> None:
    abi = f"cp{py.replace('.', '')}"
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
           "--only-binary=:all:", "--dest", str(dest), "--python-version", py,
           "--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none",
           *[a for p in platforms for a in ("--platform", p)], *pins]
    subprocess.run(cmd, check=True)


def main() -> None:
    py = python_version()
    parsed = {path: split(path) for path in FILES}
    pins = sorted({pin for _, p in parsed.values() for pin in p})
    hashes: dict[str, set[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for arch, platforms in PLATFORMS.items():
            dest = Path(tmp) / arch
            download(pins, platforms, py, dest)
            for wheel in dest.glob("*.whl"):
                name, version, *_ = parse_wheel_filename(wheel.name)
                digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
                hashes.setdefault(f"{canonicalize_name(name)}=={version}", set()).add(digest)
    for path, (header, file_pins) in parsed.items():
        lines, count = list(header), 0
        for pin in file_pins:
            name, version = pin.split("==")
            digests = hashes.get(f"{canonicalize_name(name)}=={version}")
            assert digests, f"no wheel downloaded for {pin}"
            lines.append(f"{pin} \\")
            lines += [f"    --hash=sha256:{d} \\" for d in sorted(digests)]
            lines[-1] = lines[-1].removesuffix(" \\")
            count += len(digests)
        path.write_text("\n".join(lines) + "\n")
        print(f"{path.relative_to(ROOT)}: {len(file_pins)} pins, {count} hashes")


if __name__ == "__main__":
    main()
