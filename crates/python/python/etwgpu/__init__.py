"""Run Vulkan-delegated ExecuTorch programs (``.pte``) on any GPU, through wgpu.

The API follows ``executorch.runtime``::

    from etwgpu import Runtime
    rt = Runtime.get()
    program = rt.load_program("model.pte", data_files=["model.ptd"])
    method = program.load_method("forward")
    outputs = method.execute([x])   # numpy arrays (or torch tensors) in and out
    print(method.metadata)

and LLM generation streams text::

    from etwgpu import Llm
    llm = Llm("model.pte", tokenizer="tokenizer.json")
    for piece in llm.generate("Hello", max_new_tokens=32, chat=True):
        print(piece, end="", flush=True)

Arrays cross without extra copies where the layout allows: a C-contiguous
little-endian input is read in place (one copy, into the runtime), and
outputs are numpy arrays over the runtime's own output bytes. The GIL is
released while the GPU works, and one method may be called from several
threads. Errors are :class:`Error` subclasses carrying the runtime's message.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from typing import Any, Iterator, Literal, Optional, Sequence, Union

import numpy as np

from . import _etwgpu
from ._etwgpu import DeviceError, Error, FormatError, InputError, TokenStream, UnsupportedOpError

__all__ = [
    "DeviceError",
    "Error",
    "FormatError",
    "InputError",
    "Llm",
    "Method",
    "MethodMetadata",
    "Precision",
    "Program",
    "Runtime",
    "TensorInfo",
    "TokenStream",
    "UnsupportedOpError",
]

PathLike = Union[str, "os.PathLike[str]"]

#: The ``precision=`` of :meth:`Program.load_method` and :class:`Llm`: which
#: float32 matrix products may use f16 operands on the GPU's matrix units.
Precision = Literal["f32", "mixed", "f16"]


def _torch():
    """The torch module if the caller has imported it (etwgpu never imports it)."""
    return sys.modules.get("torch")


def _is_torch_tensor(x: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


# The dtypes a numpy array can pass as it is: little-endian (native here)
# and known to the runtime, by name (a dict look-up is ten times quicker
# than ``dtype.name``).
_NATIVE_DTYPES = {
    np.dtype(name).newbyteorder("<"): name
    for name in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
}


def _raw_input(i: int, x: Any) -> tuple:
    """One input as (object with a C-contiguous buffer, dtype name, shape)."""
    if type(x) is np.ndarray:
        name = _NATIVE_DTYPES.get(x.dtype)
        if name is not None and x.flags.c_contiguous and x.ndim > 0:
            # The common case: the runtime reads the array's own buffer (a
            # 0-dim array's has no shape, so it takes the 1-d view below).
            return x, name, x.shape
    if _is_torch_tensor(x):
        torch = _torch()
        t = x.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.contiguous()
        try:
            if t.dtype == torch.bfloat16:
                arr, name = t.view(torch.int16).numpy(), "bfloat16"
            else:
                arr = t.numpy()
                name = arr.dtype.name
        except (TypeError, RuntimeError) as e:  # a dtype or layout numpy cannot hold
            raise InputError(f"input {i}: torch tensor of dtype {t.dtype} has no numpy form: {e}") from None
        if arr.dtype.kind not in "biuf" and name != "bfloat16":
            raise InputError(f"input {i}: dtype {t.dtype} (torch) is not a tensor dtype etwgpu takes")
        shape = tuple(t.shape)
    else:
        try:
            arr = np.asarray(x)
        except Exception as e:  # noqa: BLE001 - any conversion failure is the caller's input
            raise InputError(f"input {i}: cannot make an array of {type(x).__name__}: {e}") from None
        if arr.dtype.kind not in "biuf" and arr.dtype.name != "bfloat16":
            raise InputError(f"input {i}: dtype {arr.dtype} ({type(x).__name__}) is not a tensor dtype")
        name = arr.dtype.name
        shape = arr.shape
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
    # A 1-d view of the bytes (a 0-dim array's buffer has no shape: PyO3
    # refuses it as "shape is null"); it copies only what is not contiguous.
    arr = np.ascontiguousarray(arr)
    return arr.reshape(-1).view(np.uint8), name, [int(d) for d in shape]


# The numpy dtype of each dtype name the runtime gives. numpy has no
# bfloat16: its raw bits come as int16, as torch's ``view`` gives them.
_NP_DTYPES = {
    name: np.dtype(np.int16 if name == "bfloat16" else name)
    for name in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64", "bfloat16")
}


def _array(raw: tuple) -> np.ndarray:
    data, name, shape = raw
    return np.frombuffer(data, dtype=_NP_DTYPES[name]).reshape(shape)


def _wrap_outputs(raws: list, torch_out: bool) -> list:
    if not torch_out:
        return [_array(r) for r in raws]
    torch = _torch()
    out = []
    for r in raws:
        t = torch.from_numpy(_array(r))
        if r[1] == "bfloat16":
            t = t.view(torch.bfloat16)
        out.append(t)
    return out


@dataclass(frozen=True)
class TensorInfo:
    """One input or output of a method: a tensor (``dtype``, ``shape``) or
    another kind of value (``kind``, with ``value`` for constants)."""

    kind: str
    dtype: Optional[str] = None
    shape: Optional[tuple] = None
    dynamic: bool = False
    value: Any = None

    def __str__(self) -> str:
        if self.kind == "tensor":
            dims = ", ".join(str(d) for d in self.shape or ())
            dynamic = " (dynamic; sizes are upper bounds)" if self.dynamic else ""
            return f"{self.dtype}[{dims}]{dynamic}"
        if self.value is not None:
            return f"{self.kind} = {self.value}"
        return self.kind


def _info(d: dict) -> TensorInfo:
    shape = tuple(d["shape"]) if "shape" in d else None
    return TensorInfo(d["kind"], d.get("dtype"), shape, d.get("dynamic", False), d.get("value"))


@dataclass(frozen=True)
class MethodMetadata:
    """The inputs and outputs of a method, as ``etwgpu inspect`` lists them."""

    name: str
    inputs: tuple
    outputs: tuple

    def __str__(self) -> str:
        lines = [f'method "{self.name}"', "  inputs:"]
        lines += [f"    {k}: {v}" for k, v in enumerate(self.inputs)]
        lines.append("  outputs:")
        lines += [f"    {k}: {v}" for k, v in enumerate(self.outputs)]
        return "\n".join(lines)


class Method:
    """A method loaded on the device. Thread-safe: concurrent calls take turns
    on the GPU, each with its own inputs and outputs."""

    def __init__(self, native: "_etwgpu._Method", metadata: MethodMetadata):
        self._native = native
        self._metadata = metadata

    @property
    def name(self) -> str:
        """The method's name."""
        return self._native.name

    @property
    def metadata(self) -> MethodMetadata:
        """Input and output dtypes and shapes (``print`` it for inspect's listing)."""
        return self._metadata

    @property
    def n_dispatches(self) -> int:
        """GPU dispatches one call records at the current shapes."""
        return self._native.n_dispatches

    @property
    def last_run_s(self) -> float:
        """Seconds the last :meth:`execute` spent inside the runtime's ``run``
        call (what ``etwgpu run`` times); the rest of its wall time is the
        Python API's overhead."""
        return self._native.last_run_s

    def execute(self, inputs: Sequence[Any]) -> list:
        """Runs the method on ``inputs`` (numpy arrays, array-likes or torch
        tensors, one per method input).

        Returns numpy arrays, or torch tensors when any input was a torch
        tensor. Raises :class:`InputError` naming the input when a count,
        dtype or shape is wrong.
        """
        torch = _torch()
        if isinstance(inputs, np.ndarray) or (torch is not None and isinstance(inputs, torch.Tensor)):
            raise InputError("execute takes a list of inputs, not a single array: execute([x])")
        raws = [_raw_input(i, x) for i, x in enumerate(inputs)]
        torch_out = torch is not None and any(isinstance(x, torch.Tensor) for x in inputs)
        return _wrap_outputs(self._native.execute(raws), torch_out)

    def profile(self, inputs: Sequence[Any]) -> list:
        """Runs once with per-op GPU timing; returns one dict per op:
        ``call``, ``op``, ``node_id``, ``kernels``, ``dispatches``, ``ns``
        (nanoseconds) and ``gpu_timestamps`` (whether ``ns`` comes from GPU
        timestamps rather than the wall time of each dispatch alone)."""
        raws = [_raw_input(i, x) for i, x in enumerate(inputs)]
        _, rows = self._native.profile(raws)
        return rows

    def __call__(self, *inputs: Any) -> list:
        """``method(x, y)`` is ``method.execute([x, y])``."""
        return self.execute(list(inputs))

    def __repr__(self) -> str:
        return f"<etwgpu.Method {self.name!r}>"


class Program:
    """A parsed ``.pte``: every structure checked, nothing on the device yet."""

    def __init__(self, native: "_etwgpu._Program", path: str):
        self._native = native
        self._path = path

    @property
    def method_names(self) -> list:
        """The names of the program's methods."""
        return self._native.method_names

    def metadata(self, name: str = "forward") -> MethodMetadata:
        """The inputs and outputs of method ``name``, without loading it."""
        d = self._native.method_meta(name)
        return MethodMetadata(
            d["name"], tuple(_info(v) for v in d["inputs"]), tuple(_info(v) for v in d["outputs"])
        )

    def load_method(
        self, name: str = "forward", *, fuse: bool = True, precision: Optional[Precision] = None
    ) -> Method:
        """Loads method ``name`` on the device (uploads constants, compiles
        pipelines). ``fuse=False`` runs the ops as exported. ``precision``
        says which float32 matrix products may round their operands to f16
        (accumulating in f32) on the GPU's matrix units: ``"f32"`` none,
        ``"mixed"`` only the 4-bit weight linears (and prompt attention over a
        float16 KV cache), ``"f16"`` all; ``None`` takes the runtime's
        (``ETWGPU_PRECISION``, else ``"mixed"``). GPUs
        without matrix units compute float32 at every setting. Any other
        string raises ``ValueError``."""
        meta = self.metadata(name)
        return Method(self._native.load_method(name, fuse, precision), meta)

    def __repr__(self) -> str:
        return f"<etwgpu.Program {self._path!r} methods={self.method_names}>"


class Runtime:
    """A GPU device. ``Runtime.get()`` gives the shared default one."""

    _default: Optional["Runtime"] = None
    _lock = threading.Lock()

    def __init__(self, adapter: Optional[Union[int, str]] = None):
        """Opens a device on ``adapter`` (an index or a name substring, as in
        ``rt.devices()``), or the one the CLI would pick when ``None``
        (``ETWGPU_ADAPTER``, then a discrete GPU, then the best other)."""
        self._native = _etwgpu._Runtime(None if adapter is None else str(adapter))

    @classmethod
    def get(cls) -> "Runtime":
        """The process-wide default runtime, opened on first use."""
        with cls._lock:
            if cls._default is None:
                cls._default = cls()
            return cls._default

    @staticmethod
    def devices() -> list:
        """Every adapter wgpu finds, as dicts (``index``, ``name``,
        ``backend``, ``device_type``, ``driver``, limits, ``features`` and
        ``default``: whether it is the automatic choice)."""
        return _etwgpu._Runtime.adapters()

    @property
    def device(self) -> dict:
        """The adapter in use: ``name``, ``backend``, ``device_type``,
        ``driver`` and the optional ``features`` enabled."""
        return self._native.device()

    def load_program(self, path: PathLike, data_files: Sequence[PathLike] = ()) -> Program:
        """Parses the ``.pte`` at ``path``; ``data_files`` are the ``.ptd``
        files holding its external constants. Raises :class:`FormatError`."""
        path = os.fspath(path)
        native = self._native.load_program(path, [os.fspath(p) for p in data_files])
        return Program(native, path)

    def __repr__(self) -> str:
        return f"<etwgpu.Runtime on {self.device['name']!r}>"


class Llm:
    """A Llama-family program exported by ExecuTorch's ``export_llama``
    (KV cache inside ``forward``, metadata methods), ready to generate."""

    def __init__(
        self,
        path: PathLike,
        tokenizer: Optional[PathLike] = None,
        *,
        data_files: Sequence[PathLike] = (),
        runtime: Optional[Runtime] = None,
        kv_cache_f16: bool = True,
        precision: Optional[Precision] = None,
        int8_activations: Optional[bool] = None,
    ):
        """Loads ``forward`` of ``path`` on ``runtime`` (default
        ``Runtime.get()``). ``tokenizer`` is a HuggingFace ``tokenizer.json``,
        needed for text prompts. ``kv_cache_f16`` keeps float32 KV caches as
        float16 where the device has SHADER_F16 (the math stays float32).
        ``precision`` is as in :meth:`Program.load_method`.
        ``int8_activations=True`` rounds the decode GEMVs' input rows to
        int8 per 32 inputs and takes their dot products in integers: faster
        decoding of 4-bit models, at a cost in accuracy (SmolLM2-135M 4-bit
        keeps PyTorch's top-1 token at 93% of positions instead of 100%);
        ``None`` follows ``ETWGPU_INT8_ACTIVATIONS``. ``metadata`` says
        whether the load took it."""
        rt = runtime if runtime is not None else Runtime.get()
        tok = None if tokenizer is None else os.fspath(tokenizer)
        self._native = _etwgpu._Llm(
            rt._native,
            os.fspath(path),
            tok,
            [os.fspath(p) for p in data_files],
            kv_cache_f16,
            precision,
            int8_activations,
        )
        self.last_stream: Optional[TokenStream] = None

    @property
    def metadata(self) -> dict:
        """``max_seq_len``, ``max_context_len``, ``vocab_size``, ``bos_id``,
        ``eos_ids``, ``kv_cache_f16`` and ``int8_activations``."""
        return self._native.metadata

    def encode(self, text: str) -> list:
        """Token ids of ``text``."""
        return self._native.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids."""
        return self._native.decode(list(ids))

    def generate(
        self,
        prompt: Union[str, Sequence[int]],
        max_new_tokens: int = 128,
        *,
        chat: bool = False,
        system: Optional[str] = None,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        stop_at_eos: bool = True,
    ) -> Iterator:
        """Streams what the model generates after ``prompt``.

        A text prompt yields text pieces (the final stop token left out); with
        ``chat`` (or ``system``) it is wrapped as a ChatML user turn and
        generation stops at ``<|im_end|>``. A list of token ids yields token
        ids. ``temperature=0`` is greedy; ``top_k``, ``top_p`` and ``seed``
        shape sampling. Each call starts a new sequence. After the stream
        ends, ``llm.last_stream.stats`` holds the tokens and speeds.
        """
        if not isinstance(prompt, str):
            prompt = [int(t) for t in prompt]
        stream = self._native.generate(
            prompt, max_new_tokens, chat, system, temperature, top_k, top_p, seed, stop_at_eos
        )
        self.last_stream = stream
        return stream
