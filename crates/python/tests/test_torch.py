"""Torch tensors in, torch tensors out. Skipped, with the reason, where torch
is not installed (etwgpu itself never needs torch)."""

import numpy as np
import pytest

from conftest import FIXTURES, call_arrays, manifest

torch = pytest.importorskip("torch", reason="torch is not installed: the torch-in/torch-out cases need it")


def test_torch_in_torch_out(rt):
    method = rt.load_program(FIXTURES / "transformer_block" / "model.pte").load_method()
    (x,) = call_arrays("transformer_block", 0, "inputs")
    (want,) = call_arrays("transformer_block", 0, "outputs")
    (got,) = method.execute([torch.from_numpy(x)])
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32 and tuple(got.shape) == want.shape
    torch.testing.assert_close(got, torch.from_numpy(want), rtol=2e-4, atol=2e-4)
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
