"""Torch tensors in, torch tensors out. Skipped, with the reason, where torch
is not installed (etwgpu itself never needs torch)."""

import numpy as np
import pytest

import etwgpu
from conftest import FIXTURES, call_arrays, manifest

torch = pytest.importorskip("torch", reason="torch is not installed: the torch-in/torch-out cases need it")


def test_torch_in_torch_out(rt):
    method = rt.load_program(FIXTURES / "transformer_block" / "model.pte").load_method()
    (x,) = call_arrays("transformer_block", 0, "inputs")
    (want,) = call_arrays("transformer_block", 0, "outputs")
    (got,) = method.execute([torch.from_numpy(x)])
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32 and tuple(got.shape) == want.shape
    tol = manifest("transformer_block")["tolerance"]["float32"]
    torch.testing.assert_close(got, torch.from_numpy(want), rtol=tol["rtol"], atol=tol["atol"])
    # A non-contiguous tensor with autograd on still goes in.
    t = torch.from_numpy(x).transpose(1, 2).contiguous().transpose(1, 2).requires_grad_(True)
    (again,) = method.execute([t])
    torch.testing.assert_close(again, got, rtol=0, atol=0)


def test_mixed_inputs_give_torch_outputs(rt):
    method = rt.load_program(FIXTURES / "llama_tiny_fp32" / "model.pte").load_method()
    tokens, pos = call_arrays("llama_tiny_fp32", 0, "inputs")
    (got,) = method.execute([torch.from_numpy(tokens), pos])
    assert isinstance(got, torch.Tensor)
    tol = manifest("llama_tiny_fp32")["tolerance"]["float32"]
    (want,) = call_arrays("llama_tiny_fp32", 0, "outputs")
    np.testing.assert_allclose(got.numpy(), want, rtol=tol["rtol"], atol=tol["atol"])


TORCH_DTYPES = {"bool": "bool", "float16": "float16", "float32": "float32", "int32": "int32", "int64": "int64"}


@pytest.mark.parametrize("name", ["casts", "to_copy", "compare_logic"])
def test_torch_dtypes_are_kept(rt, name):
    # Every dtype crosses both ways as a torch tensor of the same dtype.
    m = manifest(name)
    method = rt.load_program(FIXTURES / name / "model.pte").load_method(m.get("method", "forward"))
    for k in range(len(m["calls"])):
        inputs = [torch.from_numpy(a) for a in call_arrays(name, k, "inputs")]
        wants = call_arrays(name, k, "outputs")
        gots = method.execute(inputs)
        assert len(gots) == len(wants)
        for i, (got, want) in enumerate(zip(gots, wants)):
            assert isinstance(got, torch.Tensor), f"{name} call {k} out {i}: {type(got).__name__}"
            expected_dtype = getattr(torch, TORCH_DTYPES[want.dtype.name])
            assert got.dtype == expected_dtype and tuple(got.shape) == want.shape, (
                f"{name} call {k} out {i}: got {got.dtype} {tuple(got.shape)}, expected {expected_dtype} {want.shape}"
            )
            tol = m["tolerance"][want.dtype.name]
            np.testing.assert_allclose(
                got.numpy().astype(np.float64),
                want.astype(np.float64),
                rtol=tol["rtol"],
                atol=tol["atol"],
                equal_nan=True,
                err_msg=f"{name} call {k} out {i}",
            )


def test_torch_dtypes_etwgpu_cannot_take_raise_input_error(rt):
    method = rt.load_program(FIXTURES / "transformer_block" / "model.pte").load_method()
    with pytest.raises(etwgpu.InputError, match="input 0: .*complex64"):
        method.execute([torch.zeros((1, 8, 32), dtype=torch.complex64)])
    with pytest.raises(etwgpu.InputError, match="input 0: dtype uint16 is not one etwgpu can take"):
        method.execute([torch.zeros((1, 8, 32), dtype=torch.uint16)])
