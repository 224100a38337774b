"""Bad input raises the named ``etwgpu.Error`` subclass with the runtime's
message, never a crash: every hostile file of ``test_data/hostile/``, and
wrong input counts, dtypes, shapes and kinds."""

import numpy as np
import pytest

import etwgpu
from conftest import FIXTURES, HOSTILE, call_arrays

HOSTILE_FILES = sorted(p.name for p in HOSTILE.glob("*.pte"))

# Files whose problem is an operator etwgpu has no kernel for; every other
# hostile file is a malformed program (FormatError).
UNSUPPORTED = {"op_unknown.pte": "aten.frobnicate.default"}


def test_exception_hierarchy():
    assert issubclass(etwgpu.Error, RuntimeError)
    for cls in (etwgpu.FormatError, etwgpu.UnsupportedOpError, etwgpu.InputError, etwgpu.DeviceError):
        assert issubclass(cls, etwgpu.Error) and cls is not etwgpu.Error


@pytest.mark.parametrize("name", HOSTILE_FILES)
def test_hostile_file_raises_the_named_error(rt, name):
    expected = etwgpu.UnsupportedOpError if name in UNSUPPORTED else etwgpu.FormatError
    with pytest.raises(etwgpu.Error) as info:
        program = rt.load_program(HOSTILE / name)
        for method in program.method_names:
            program.load_method(method)
    assert type(info.value) is expected, f"{name}: {type(info.value).__name__}: {info.value}"
    assert str(info.value), name
    if name in UNSUPPORTED:
        assert UNSUPPORTED[name] in str(info.value)


def test_hostile_list_is_not_empty():
    assert len(HOSTILE_FILES) >= 40


def test_missing_file_is_a_format_error_naming_it(rt, tmp_path):
    path = tmp_path / "absent.pte"
    with pytest.raises(etwgpu.FormatError, match="absent.pte"):
        rt.load_program(path)


def test_missing_method(rt):
    program = rt.load_program(FIXTURES / "mlp" / "model.pte")
    with pytest.raises(etwgpu.Error, match=r"no method \"backward\""):
        program.load_method("backward")
    with pytest.raises(etwgpu.Error, match="no method"):
        program.metadata("backward")


@pytest.fixture(scope="module")
def block(rt):
    return rt.load_program(FIXTURES / "transformer_block" / "model.pte").load_method()


def test_wrong_dtype_names_the_input_and_what_was_expected(block):
    (x,) = call_arrays("transformer_block", 0, "inputs")
    with pytest.raises(etwgpu.InputError, match="input 0: expected dtype float32, found float64"):
        block.execute([x.astype(np.float64)])


def test_wrong_shape_names_the_input_and_the_maximum(block):
    with pytest.raises(etwgpu.InputError, match=r"input 0: shape \[1, 9, 32\] does not fit the maximum \[1, 8, 32\]"):
        block.execute([np.zeros((1, 9, 32), np.float32)])


def test_wrong_count(block):
    x = np.zeros((1, 8, 32), np.float32)
    with pytest.raises(etwgpu.InputError, match="expected 1 inputs, found 2"):
        block.execute([x, x])
    with pytest.raises(etwgpu.InputError, match="expected 1 inputs, found 0"):
        block.execute([])


def test_inputs_that_are_not_tensors(block):
    with pytest.raises(etwgpu.InputError, match="input 0: dtype <U5"):
        block.execute(["hello"])
    with pytest.raises(etwgpu.InputError, match="input 0: dtype complex64"):
        block.execute([np.zeros((1, 8, 32), np.complex64)])
    with pytest.raises(etwgpu.InputError, match="a list of inputs"):
        block.execute(np.zeros((1, 8, 32), np.float32))


def test_the_method_still_works_after_errors(block):
    (x,) = call_arrays("transformer_block", 0, "inputs")
    (got,) = block.execute([x])
    np.testing.assert_allclose(got, call_arrays("transformer_block", 0, "outputs")[0], rtol=2e-4, atol=2e-4)


def test_bad_adapter_is_a_device_error():
    with pytest.raises(etwgpu.DeviceError, match="matches none of the adapters"):
        etwgpu.Runtime(adapter="no such adapter, surely")
