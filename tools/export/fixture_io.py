"""Writes one fixture directory: model.pte, call<K>.{in,out}<I>.npy, manifest.json."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

import pte_inspect
import tolerances

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES_DIR = REPO_ROOT / "test_data" / "fixtures"

TORCH_DTYPE_NAMES = {
    torch.float32: "float32",
    torch.float16: "float16",
    torch.float64: "float64",
    torch.bfloat16: "bfloat16",
    torch.int64: "int64",
    torch.int32: "int32",
    torch.int16: "int16",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.bool: "bool",
}


@dataclass
class Call:
    """One method invocation: its inputs and the eager PyTorch outputs."""

    inputs: Sequence[torch.Tensor]
    outputs: Sequence[torch.Tensor]


@dataclass
class FixtureResult:
    name: str
    description: str
    export: dict[str, Any]
    pte: bytes
    calls: list[Call]
    stateful: bool = False
    notes: list[str] = field(default_factory=list)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"fixture I/O must be tensors, got {type(t).__name__}")
    if t.dtype == torch.bfloat16:
        raise TypeError("bfloat16 has no numpy dtype")
    return t.detach().cpu().contiguous().numpy()


def write_fixture(result: FixtureResult, out_root: Path = FIXTURES_DIR,
                  dump_dir: Path | None = None) -> dict[str, Any]:
    """Writes the fixture and returns its manifest."""
    out = out_root / result.name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / "model.pte").write_bytes(result.pte)

    calls_manifest = []
    out_dtypes: list[str] = []
    for k, call in enumerate(result.calls):
        ins, outs = [], []
        for i, t in enumerate(call.inputs):
            fname = f"call{k}.in{i}.npy"
            np.save(out / fname, to_numpy(t), allow_pickle=False)
            ins.append(fname)
        for i, t in enumerate(call.outputs):
            fname = f"call{k}.out{i}.npy"
            np.save(out / fname, to_numpy(t), allow_pickle=False)
            outs.append(fname)
            out_dtypes.append(TORCH_DTYPE_NAMES[t.dtype])
        calls_manifest.append({"inputs": ins, "outputs": outs})

    expected = pte_inspect.summarize_pte(result.pte, dump_dir)
    _check_calls_against_program(result, expected)

    manifest = {
        "name": result.name,
        "description": result.description,
        "method": "forward",
        "export": result.export,
        "stateful": result.stateful,
        "calls": calls_manifest,
        "tolerance": tolerances.manifest_tolerances(result.name, out_dtypes),
        "tolerance_f16_operands": tolerances.manifest_tolerances_f16_operands(result.name, out_dtypes),
        "expected": expected,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _check_calls_against_program(result: FixtureResult, expected: dict[str, Any]) -> None:
    """The goldens must fit the method signature the exporter recorded."""
    forward = next(m for m in expected["methods"] if m["name"] == "forward")
    for k, call in enumerate(result.calls):
        for kind, tensors, specs in (("input", call.inputs, forward["inputs"]),
                                     ("output", call.outputs, forward["outputs"])):
            if len(tensors) != len(specs):
                raise AssertionError(
                    f"{result.name} call{k}: {len(tensors)} {kind}s, program has {len(specs)}")
            for i, (t, spec) in enumerate(zip(tensors, specs)):
                dtype = TORCH_DTYPE_NAMES[t.dtype]
                if spec.get("dtype") != dtype:
                    raise AssertionError(
                        f"{result.name} call{k} {kind}{i}: dtype {dtype}, program {spec}")
                max_shape = spec["shape"]
                if len(max_shape) != t.dim() or any(
                        s > m for s, m in zip(t.shape, max_shape)):
                    raise AssertionError(
                        f"{result.name} call{k} {kind}{i}: shape {list(t.shape)} "
                        f"does not fit {max_shape}")


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
