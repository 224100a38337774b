"""Independent summary of a `.pte` file: the `expected` block of a fixture manifest.

Nothing here shares code with the Rust crates. The Program flatbuffer is
decoded by ExecuTorch's own Python deserializer; every Vulkan delegate blob is
cut out of the file by hand (segment or inline), its VH00 header is parsed
with `struct`, and its VK00 flatbuffer is dumped to JSON with the `flatc`
binary and `schema.fbs` that ship inside the executorch wheel.

Run as a script to print the summary of any `.pte`:

    python3 tools/export/pte_inspect.py model.pte [--dump-vk DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from executorch.exir import schema as et_schema
from executorch.exir._serialize._flatbuffer_program import _flatbuffer_to_program

VULKAN_BACKEND_ID = "VulkanBackend"

# Program ScalarType -> dtype name as PyTorch spells it.
SCALAR_TYPE_NAMES = {
    0: "uint8",
    1: "int8",
    2: "int16",
    3: "int32",
    4: "int64",
    5: "float16",
    6: "float32",
    7: "float64",
    11: "bool",
    15: "bfloat16",
    27: "uint16",
    28: "uint32",
    29: "uint64",
}

# Program KernelTypes member class -> "kind" used for non-tensor method I/O.
NON_TENSOR_KINDS = {
    et_schema.Null: "none",
    et_schema.Int: "int",
    et_schema.Bool: "bool",
    et_schema.Double: "double",
    et_schema.String: "string",
    et_schema.IntList: "int_list",
    et_schema.DoubleList: "double_list",
    et_schema.BoolList: "bool_list",
    et_schema.TensorList: "tensor_list",
    et_schema.OptionalTensorList: "optional_tensor_list",
}


def executorch_dir() -> Path:
    """Directory of the installed executorch package (a namespace package)."""
    import executorch

    return Path(list(executorch.__path__)[0])


def flatc_path() -> Path:
    return executorch_dir() / "data" / "bin" / "flatc"


def vk_schema_path() -> Path:
    return executorch_dir() / "backends" / "vulkan" / "serialization" / "schema.fbs"


def _u32(b: bytes, off: int) -> int:
    return struct.unpack_from("<I", b, off)[0]


def _u64(b: bytes, off: int) -> int:
    return struct.unpack_from("<Q", b, off)[0]


def parse_extended_header(data: bytes) -> dict[str, int] | None:
    """The `eh00` header at file offset 8, or None when absent."""
    if len(data) < 40 or data[8:12] != b"eh00":
        return None
    length = _u32(data, 12)
    if length < 24:
        return None
    return {
        "header_length": length,
        "program_size": _u64(data, 16),
        "segment_base_offset": _u64(data, 24),
        "segment_data_size": _u64(data, 32) if length >= 32 else 0,
    }


def load_program(data: bytes) -> tuple[et_schema.Program, int]:
    """Returns the Program (segments left in place) and segment_base_offset."""
    if data[4:8] != b"ET12":
        raise ValueError(f"not an ET12 program: identifier {data[4:8]!r}")
    eh = parse_extended_header(data)
    program_size = eh["program_size"] if eh else len(data)
    base = eh["segment_base_offset"] if eh else 0
    return _flatbuffer_to_program(data[:program_size]), base


def delegate_blob(data: bytes, program: et_schema.Program, base: int,
                  delegate: et_schema.BackendDelegate) -> bytes:
    ref = delegate.processed
    if ref.location == et_schema.DataLocation.SEGMENT:
        seg = program.segments[ref.index]
        start = base + seg.offset
        return data[start:start + seg.size]
    if ref.location == et_schema.DataLocation.INLINE:
        return bytes(program.backend_delegate_data[ref.index].data)
    raise ValueError(f"unknown delegate data location {ref.location}")


def parse_vh00(blob: bytes) -> dict[str, int]:
    """The 32-byte VH00 header of a Vulkan delegate blob (FORMAT.md section 4)."""
    if len(blob) < 32 or blob[4:8] != b"VH00":
        raise ValueError(f"delegate blob has no VH00 header: {blob[:8]!r}")
    header_size = struct.unpack_from("<H", blob, 8)[0]
    fb_offset = _u32(blob, 10)
    fb_size = _u32(blob, 14)
    bytes_offset = _u32(blob, 18)
    bytes_size = _u64(blob, 22)
    if header_size < 30 or fb_offset < header_size or fb_size == 0:
        raise ValueError("invalid VH00 header")
    if bytes_offset < fb_offset + fb_size or fb_offset + fb_size > len(blob):
        raise ValueError("invalid VH00 ranges")
    return {
        "header_size": header_size,
        "flatbuffer_offset": fb_offset,
        "flatbuffer_size": fb_size,
        "bytes_offset": bytes_offset,
        "bytes_size": bytes_size,
    }


def vk00_to_json(fb: bytes) -> dict[str, Any]:
    """Dumps a VK00 flatbuffer to a dict through the wheel's flatc and schema."""
    if fb[4:8] != b"VK00":
        raise ValueError(f"VK00 identifier missing: {fb[4:8]!r}")
    with tempfile.TemporaryDirectory(prefix="etwgpu_vk00_") as tmp:
        bin_path = os.path.join(tmp, "graph.bin")
        with open(bin_path, "wb") as f:
            f.write(fb)
        subprocess.run(
            [str(flatc_path()), "--json", "--strict-json", "--raw-binary",
             "--defaults-json", "-o", tmp, str(vk_schema_path()), "--", bin_path],
            check=True, capture_output=True)
        with open(os.path.join(tmp, "graph.json"), "r", encoding="utf-8") as f:
            text = f.read()
        # flatc writes non-finite doubles (an attention mask's -inf) as bare
        # inf/nan, which JSON lacks; Python's parser reads Infinity/NaN.
        text = re.sub(r"(?<=[\s:\[,])(-?)inf\b", r"\1Infinity", text)
        text = re.sub(r"(?<=[\s:\[,])-?nan\b", "NaN", text)
        return json.loads(text)


def _io_entry(value: et_schema.EValue) -> dict[str, Any]:
    val = value.val
    if isinstance(val, et_schema.Tensor):
        st = int(val.scalar_type)
        return {"dtype": SCALAR_TYPE_NAMES.get(st, f"scalar_type_{st}"),
                "shape": [int(s) for s in val.sizes]}
    return {"kind": NON_TENSOR_KINDS.get(type(val), type(val).__name__.lower())}


def summarize_delegate(delegate: et_schema.BackendDelegate, blob: bytes,
                       dump_dir: Path | None = None,
                       dump_name: str = "vk00") -> dict[str, Any]:
    header = parse_vh00(blob)
    fb = blob[header["flatbuffer_offset"]:
              header["flatbuffer_offset"] + header["flatbuffer_size"]]
    graph = vk00_to_json(fb)
    if dump_dir is not None:
        dump_dir.mkdir(parents=True, exist_ok=True)
        (dump_dir / f"{dump_name}.json").write_text(json.dumps(graph, indent=1))
    chain = graph.get("chain") or []
    ops = collections.Counter(call["name"] for call in chain)
    constants = graph.get("constants") or []
    return {
        "backend_id": delegate.id,
        "n_values": len(graph.get("values") or []),
        "n_nodes": len(chain),
        "ops": dict(sorted(ops.items())),
        "n_constants": len(constants),
        "constant_bytes": int(sum(int(c.get("length", 0)) for c in constants)),
    }


def summarize_pte(data: bytes, dump_dir: Path | None = None) -> dict[str, Any]:
    """The `expected` block: methods, their I/O, Vulkan delegates, CPU kernels."""
    program, base = load_program(data)
    methods = []
    for plan in program.execution_plan:
        delegates = []
        for d_idx, delegate in enumerate(plan.delegates):
            if delegate.id != VULKAN_BACKEND_ID:
                delegates.append({"backend_id": delegate.id})
                continue
            blob = delegate_blob(data, program, base, delegate)
            delegates.append(summarize_delegate(
                delegate, blob, dump_dir, f"{plan.name}.delegate{d_idx}"))
        kernel_calls = []
        for chain in plan.chains:
            for instr in chain.instructions:
                args = instr.instr_args
                if isinstance(args, et_schema.KernelCall):
                    op = plan.operators[args.op_index]
                    kernel_calls.append(
                        f"{op.name}.{op.overload}" if op.overload else op.name)
        methods.append({
            "name": plan.name,
            "inputs": [_io_entry(plan.values[i]) for i in plan.inputs],
            "outputs": [_io_entry(plan.values[i]) for i in plan.outputs],
            "delegates": delegates,
            "kernel_calls": kernel_calls,
        })
    return {"methods": methods}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pte", type=Path)
    parser.add_argument("--dump-vk", type=Path, default=None,
                        help="also write each VK00 graph as JSON into this folder")
    args = parser.parse_args()
    summary = summarize_pte(args.pte.read_bytes(), args.dump_vk)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
