"""The instruction-set paths a test can run a script on, and how to launch each."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Target", "available_targets", "native_kernel", "run_script"]

_HERE = Path(__file__).resolve().parent
_QEMU = "qemu-x86_64"


@dataclass(frozen=True, slots=True)
class Target:
    """One way to run a script: a name, the kernel onnxruntime takes on it, the launch prefix."""

    name: str
    kernel: str
    prefix: tuple[str, ...]


def _flags() -> set[str]:
    text = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return set(line.split(":", 1)[-1].split())


def native_kernel(flags: set[str] | None = None) -> str:
    """The widest integer kernel family onnxruntime picks on this CPU."""
    flags = _flags() if flags is None else flags
    for flag, kernel in (
        ("amx_int8", "AMX"),
        ("avx512_vnni", "AVX-512 VNNI"),
        ("avx_vnni", "AVX-VNNI"),
        ("avx512bw", "AVX-512BW"),
        ("avx2", "AVX2"),
    ):
        if flag in flags:
            return kernel
    return "SSE"


def _noamx(build_dir: Path) -> Path:
    binary = build_dir / "noamx"
    if not binary.is_file():
        build_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["gcc", "-O2", "-o", str(binary), str(_HERE / "noamx.c")], check=True, timeout=120
        )
    return binary


def available_targets(build_dir: Path) -> list[Target]:
    """Native, AVX2 under qemu, and AVX-512 VNNI with AMX refused when the CPU has AMX. A
    missing ``qemu-x86_64`` is an error: ``scripts/bootstrap.sh`` installs it."""
    if shutil.which(_QEMU) is None:
        raise FileNotFoundError(f"{_QEMU} not found: run scripts/bootstrap.sh (Debian qemu-user)")
    kernel = native_kernel()
    paths = [
        Target("native", kernel, ()),
        Target("avx2", "AVX2", (_QEMU, "-cpu", "Haswell")),
    ]
    if kernel == "AMX":
        paths.append(
            Target("no_amx", native_kernel(_flags() - {"amx_int8"}), (str(_noamx(build_dir)),))
        )
    return paths


def run_script(path: Target, script: Path, *args: str, timeout_s: float = 900) -> None:
    """Run ``script`` with this checkout's Python on ``path``; raise with its output if it fails."""
    argv = [*path.prefix, sys.executable, str(script), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{path.name}: {script.name} failed:\n{done.stderr[-3000:]}")
