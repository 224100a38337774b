"""Every golden fixture of ``test_data/fixtures/`` through the Python API:
its calls run in order on one loaded method, and each output matches its
PyTorch eager golden within the manifest's tolerance for its dtype
(``|got - want| <= atol + rtol * |want|``, NaN matching NaN)."""

import subprocess
import sys

import numpy as np
import pytest

import etwgpu
from conftest import FIXTURES, call_arrays, fixture_names, manifest


def check_outputs(name, k, gots, wants, tolerance):
    assert len(gots) == len(wants), f"{name} call {k}: {len(gots)} outputs, expected {len(wants)}"
    for i, (got, want) in enumerate(zip(gots, wants)):
        assert isinstance(got, np.ndarray)
        assert got.dtype == want.dtype and got.shape == want.shape, (
            f"{name} call {k} out {i}: got {got.dtype} {got.shape}, expected {want.dtype} {want.shape}"
        )
        tol = tolerance[want.dtype.name]
        np.testing.assert_allclose(
            got.astype(np.float64),
            want.astype(np.float64),
            rtol=tol["rtol"],
            atol=tol["atol"],
            equal_nan=True,
            err_msg=f"{name} call {k} out {i}",
        )


@pytest.mark.parametrize("name", fixture_names())
def test_golden_fixture(rt, name):
    m = manifest(name)
    program = rt.load_program(FIXTURES / name / "model.pte")
    method_name = m.get("method", "forward")
    assert method_name in program.method_names
    method = program.load_method(method_name)
    for k in range(len(m["calls"])):
        inputs = call_arrays(name, k, "inputs")
        gots = method.execute(inputs)
        check_outputs(name, k, gots, call_arrays(name, k, "outputs"), m["tolerance"])


@pytest.mark.parametrize("name", ["q4_weight_only", "llama_tiny_q4", "mlp"])
def test_each_precision_matches_the_goldens(rt, name):
    # `precision=` takes "f32", "mixed" (the default: 4-bit linears on f16
    # operands where the GPU has matrix units) and "f16" (every float32
    # product; judged by the manifest's `tolerance_f16_operands` rows).
    # Without matrix units (lavapipe, CI) all three compute float32.
    m = manifest(name)
    program = rt.load_program(FIXTURES / name / "model.pte")
    for precision in ("f32", "mixed", "f16"):
        method = program.load_method(m.get("method", "forward"), precision=precision)
        rows = m["tolerance_f16_operands"] if precision == "f16" else m["tolerance"]
        for k in range(len(m["calls"])):
            gots = method.execute(call_arrays(name, k, "inputs"))
            check_outputs(f"{name} at {precision}", k, gots, call_arrays(name, k, "outputs"), rows)
    for bad in ("half", "F16", ""):
        with pytest.raises(ValueError, match="takes f32, mixed or f16"):
            program.load_method("forward", precision=bad)


def test_fixture_list_is_complete():
    # The parametrized test covers every fixture directory with a manifest.
    dirs = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
    assert dirs == fixture_names() and len(dirs) >= 30


def test_metadata_matches_the_manifest(rt):
    m = manifest("transformer_block")
    program = rt.load_program(FIXTURES / "transformer_block" / "model.pte")
    method = program.load_method("forward")
    want = m["expected"]["methods"][0]
    meta = method.metadata
    assert meta.name == "forward"
    assert [(t.dtype, list(t.shape)) for t in meta.inputs] == [(t["dtype"], t["shape"]) for t in want["inputs"]]
    assert [(t.dtype, list(t.shape)) for t in meta.outputs] == [(t["dtype"], t["shape"]) for t in want["outputs"]]
    # As `etwgpu inspect` lists it.
    assert str(meta) == 'method "forward"\n  inputs:\n    0: float32[1, 8, 32]\n  outputs:\n    0: float32[1, 8, 32]'
    assert program.metadata("forward") == meta


def test_dynamic_inputs_are_marked(rt):
    meta = rt.load_program(FIXTURES / "dynamic_seq" / "model.pte").metadata()
    assert any(t.dynamic for t in meta.inputs), meta
    assert "upper bounds" in str(meta)


def test_outputs_wrap_the_runtime_bytes_without_a_copy(rt):
    method = rt.load_program(FIXTURES / "transformer_block" / "model.pte").load_method()
    (out,) = method.execute(call_arrays("transformer_block", 0, "inputs"))
    # The array views the runtime's output allocation itself.
    owner = out
    while isinstance(owner, np.ndarray):
        owner = owner.base
    assert type(owner).__name__ == "Bytes" and type(owner).__module__ == "etwgpu._etwgpu"
    assert len(owner) == out.nbytes
    assert out.flags.c_contiguous and out.flags.writeable and out.flags.aligned
    out[...] = 0  # writable: it is the caller's array now
    assert not out.any()


def test_non_contiguous_and_big_endian_inputs(rt):
    method = rt.load_program(FIXTURES / "transformer_block" / "model.pte").load_method()
    (x,) = call_arrays("transformer_block", 0, "inputs")
    (want,) = method.execute([x])
    strided = np.asfortranarray(x)
    assert not strided.flags.c_contiguous
    big = x.astype(">f4")
    for variant in (strided, big, x.tolist()):
        if isinstance(variant, list):
            variant = np.asarray(variant, dtype=np.float32)
        (got,) = method.execute([variant])
        np.testing.assert_array_equal(got, want)


def test_method_call_and_dispatch_count(rt):
    method = rt.load_program(FIXTURES / "mlp" / "model.pte").load_method()
    assert method.last_run_s == 0.0
    inputs = call_arrays("mlp", 0, "inputs")
    np.testing.assert_array_equal(method(*inputs)[0], method.execute(inputs)[0])
    assert method.n_dispatches > 0
    assert method.last_run_s > 0.0


def test_profile_rows(rt):
    method = rt.load_program(FIXTURES / "transformer_block" / "model.pte").load_method()
    rows = method.profile(call_arrays("transformer_block", 0, "inputs"))
    assert rows and {"call", "op", "node_id", "kernels", "dispatches", "ns", "gpu_timestamps"} <= set(rows[0])
    assert sum(r["dispatches"] for r in rows) == method.n_dispatches
    assert all(r["ns"] >= 0 and (r["dispatches"] == 0) == (not r["kernels"]) for r in rows)
    # Profiling is off again afterwards, and results are unchanged.
    (got,) = method.execute(call_arrays("transformer_block", 0, "inputs"))
    np.testing.assert_allclose(got, call_arrays("transformer_block", 0, "outputs")[0], rtol=2e-4, atol=2e-4)


def test_devices_and_runtime(rt):
    devices = etwgpu.Runtime.devices()
    assert devices and all({"index", "name", "backend", "features", "default"} <= set(d) for d in devices)
    assert rt.device["name"] in {d["name"] for d in devices}
    assert etwgpu.Runtime.get() is rt
    # An explicit adapter by index opens a second device.
    other = etwgpu.Runtime(adapter=devices[0]["index"])
    assert other.device["name"] == devices[0]["name"]


def test_importing_etwgpu_does_not_import_torch():
    code = "import sys, etwgpu; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
