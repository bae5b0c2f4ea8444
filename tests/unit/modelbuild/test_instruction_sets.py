"""The CPU encoder gives the same numbers on every instruction set onnxruntime may pick: run on
this CPU, on an emulated AVX2-only CPU (qemu) and, where the CPU has AMX, with AMX refused (its
AVX-512 VNNI kernels). The control proves the emulated path really is the saturating kernel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tiny_e5 import write_tiny_e5

from bench.instruction_sets.targets import Target, available_targets, run_script
from common.settings import project_root
from modelbuild.cpu_encoder import build_cpu_encoder
from modelbuild.e5_weights import read_e5
from modelbuild.encoder_graph import build_encoder, save_encoder

PROBE = project_root() / "bench" / "instruction_sets" / "probe.py"
IDS = np.array([[0, 7, 4, 5, 2, 1, 1], [0, 8, 9, 6, 4, 5, 2], [0, 4, 2, 1, 1, 1, 1]])


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> list[Target]:
    return available_targets(tmp_path_factory.mktemp("noamx"))


def test_the_emulated_avx2_kernel_saturates_8_bit_weights_but_not_7_bit_ones(
    targets: list[Target], tmp_path: Path
) -> None:
    """Under the emulated AVX2 CPU, uint8 x int8 products with weights up to 127 come out wrong
    (vpmaddubsw saturates its 16-bit pair sums) while weights up to 64 stay exact; natively and
    with AMX refused both are exact. Without the first assertion the other tests would prove
    nothing about AVX2."""
    for target in targets:
        out = tmp_path / f"{target.name}.npz"
        run_script(target, PROBE, "products", str(out))
        got = np.load(out)
        assert np.array_equal(got["w64"], got["w64_exact"]), target.name
        exact_127 = np.array_equal(got["w127"], got["w127_exact"])
        assert exact_127 == (target.kernel in ("AMX", "AVX-512 VNNI", "AVX-VNNI")), target.name
        if target.name == "no_amx":
            assert not bool(got["amx_permitted"])


def test_the_cpu_encoder_agrees_with_itself_and_float32_on_every_path(
    targets: list[Target], tmp_path: Path
) -> None:
    """The tiny CPU encoder's features on every path are within 5e-5 of the native run and
    within 2e-3 of native float32; the float32 encoder agrees across paths within 1e-6."""
    write_tiny_e5(tmp_path / "e5.bin")
    weights = read_e5(tmp_path / "e5.bin")
    save_encoder(build_encoder(weights, (1,)), tmp_path / "fp32.onnx")
    save_encoder(build_cpu_encoder(weights, (1,)), tmp_path / "cpu.onnx")
    np.savez(tmp_path / "in.npz", input_ids=IDS, attention_mask=(IDS != 1).astype(np.int64))
    runs: dict[tuple[str, str], np.ndarray] = {}
    for target in targets:
        for encoder in ("fp32", "cpu"):
            out = tmp_path / f"{target.name}-{encoder}.npz"
            model = str(tmp_path / f"{encoder}.onnx")
            run_script(target, PROBE, "encoder", model, str(tmp_path / "in.npz"), str(out))
            runs[target.name, encoder] = np.load(out)["features"]
    assert {name for name, _ in runs} >= {"native", "avx2"}
    for target in targets:
        cpu, fp32 = runs[target.name, "cpu"], runs[target.name, "fp32"]
        assert float(np.abs(cpu - runs["native", "cpu"]).max()) <= 5e-5, target.name
        assert float(np.abs(cpu - runs["native", "fp32"]).max()) <= 2e-3, target.name
        assert float(np.abs(fp32 - runs["native", "fp32"]).max()) <= 1e-6, target.name
