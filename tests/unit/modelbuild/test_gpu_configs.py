"""The committed ``configs/gpu.pbtxt`` files are what ``modstream models gpu-configs`` makes, and
differ from their CPU configs only where a GPU should."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from common.settings import project_root
from modelbuild.gpu_configs import (
    CPU_ONLY_PARAMETERS,
    GPU_INSTANCES,
    GPU_MODELS,
    gpu_config,
    write_gpu_configs,
)

REPOSITORY = project_root() / "model_repository"


def _parse(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


@pytest.mark.parametrize("model", GPU_MODELS)
def test_the_committed_gpu_config_is_a_fresh_generation(model: str) -> None:
    """Equal, byte for byte, to what the generator makes of today's config.pbtxt (after a
    change to config.pbtxt, run ``modstream models gpu-configs``)."""
    cpu = (REPOSITORY / model / "config.pbtxt").read_text(encoding="utf-8")
    committed = (REPOSITORY / model / "configs" / "gpu.pbtxt").read_text(encoding="utf-8")
    assert committed == gpu_config(cpu), "run `modstream models gpu-configs`"


@pytest.mark.parametrize("model", GPU_MODELS)
def test_only_instances_batching_and_cpu_encoder_parameters_change(model: str) -> None:
    """KIND_GPU instances, a longer batching window with preferred sizes, no CPU-encoder
    parameters; everything else (inputs, outputs, files, versions) as on CPU."""
    cpu = _parse((REPOSITORY / model / "config.pbtxt").read_text(encoding="utf-8"))
    gpu = _parse((REPOSITORY / model / "configs" / "gpu.pbtxt").read_text(encoding="utf-8"))
    (group,) = gpu.instance_group
    assert (group.kind, group.count) == (model_config_pb2.ModelInstanceGroup.KIND_GPU, 2)
    assert GPU_INSTANCES == 2
    assert list(gpu.dynamic_batching.preferred_batch_size) == [64, 128]
    assert not set(CPU_ONLY_PARAMETERS) & set(gpu.parameters)
    assert ("encoder_file" in gpu.parameters) == ("encoder_file" in cpu.parameters)
    for config in (cpu, gpu):
        del config.instance_group[:]
        config.dynamic_batching.Clear()
        for key in CPU_ONLY_PARAMETERS:
            if key in config.parameters:
                del config.parameters[key]
    assert gpu == cpu


def test_the_generator_writes_beside_each_gpu_model_only(tmp_path: Path) -> None:
    """``configs/gpu.pbtxt`` for the encoder-running models present; others are left alone."""
    for model in ("moderation", "tokenizer"):
        (tmp_path / model).mkdir()
        (tmp_path / model / "config.pbtxt").write_text(
            (REPOSITORY / model / "config.pbtxt").read_text(encoding="utf-8")
        )
    written = write_gpu_configs(tmp_path)
    assert written == [tmp_path / "moderation" / "configs" / "gpu.pbtxt"]
    assert not (tmp_path / "tokenizer" / "configs").exists()
