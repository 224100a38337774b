"""Type stubs of ``etwgpu._etwgpu``, the native half of ``etwgpu``.

The public API is ``etwgpu`` itself (``Runtime``, ``Program``, ``Method``,
``Llm``); these classes take and give raw triples: a C-contiguous ``uint8``
buffer, a dtype name (torch's: ``float32``, ``int64``, ...) and a shape.
"""

import sys
from typing import Any, Literal, Optional, Sequence, Union, final

__all__ = [
    "Bytes",
    "DeviceError",
    "Error",
    "FormatError",
    "InputError",
    "TokenStream",
    "UnsupportedOpError",
    "_Llm",
    "_Method",
    "_Program",
    "_Runtime",
]

# (an object with a C-contiguous buffer, a dtype name, a shape)
_RawInput = tuple[Any, str, Sequence[int]]
# (the bytes, a dtype name, a shape)
_RawOutput = tuple["Bytes", str, list[int]]

class Error(RuntimeError):
    """Base class of every error etwgpu raises; the message is the runtime's."""

class FormatError(Error):
    """The file is not a program etwgpu can read: malformed, truncated, missing data, or missing on disk."""

class UnsupportedOpError(Error):
    """The program holds an operator (or dtype) that etwgpu has no kernel for."""

class InputError(Error):
    """An argument is wrong: input count, dtype, shape or value, prompt or sampler settings."""

class DeviceError(Error):
    """The GPU failed: no adapter, a missing feature or limit, out of memory, a lost device."""

@final
class Bytes:
    """Bytes owned by the runtime, lent through the buffer protocol (writable, format ``B``)."""

    def __len__(self) -> int: ...
    if sys.version_info >= (3, 12):
        def __buffer__(self, flags: int, /) -> memoryview: ...

@final
class _Runtime:
    def __new__(cls, adapter: Optional[str] = None) -> _Runtime: ...
    @staticmethod
    def adapters() -> list[dict[str, Any]]: ...
    def device(self) -> dict[str, Any]: ...
    def load_program(self, path: str, data_files: Sequence[str] = ...) -> _Program: ...

@final
class _Program:
    @property
    def method_names(self) -> list[str]: ...
    def method_meta(self, name: str) -> dict[str, Any]: ...
    def load_method(
        self, name: str, fuse: bool = True, precision: Optional[Literal["f32", "mixed", "f16"]] = None
    ) -> _Method: ...

@final
class _Method:
    @property
    def name(self) -> str: ...
    @property
    def n_dispatches(self) -> int: ...
    @property
    def last_run_s(self) -> float: ...
    def execute(self, inputs: Sequence[_RawInput]) -> list[_RawOutput]: ...
    def profile(self, inputs: Sequence[_RawInput]) -> tuple[list[_RawOutput], list[dict[str, Any]]]: ...

@final
class TokenStream:
    """The pieces of one ``Llm.generate`` call (``str`` for text prompts, ``int`` for token prompts)."""

    def __iter__(self) -> TokenStream: ...
    def __next__(self) -> Union[str, int]: ...
    @property
    def stats(self) -> Optional[dict[str, Any]]:
        """``tokens``, ``prompt_tokens``, ``generated_tokens``, ``decode_steps``, ``prefill_s``,
        ``decode_s``, ``prefill_tokens_per_s``, ``decode_tokens_per_s``, ``stopped``; ``None``
        until the stream ends."""

@final
class _Llm:
    def __new__(
        cls,
        runtime: _Runtime,
        path: str,
        tokenizer: Optional[str] = None,
        data_files: Sequence[str] = ...,
        kv_cache_f16: bool = True,
        precision: Optional[Literal["f32", "mixed", "f16"]] = None,
        int8_activations: Optional[bool] = None,
    ) -> _Llm: ...
    @property
    def metadata(self) -> dict[str, Any]: ...
    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: Sequence[int]) -> str: ...
    def generate(
        self,
        prompt: Union[str, Sequence[int]],
        max_new_tokens: int = 128,
        chat: bool = False,
        system: Optional[str] = None,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        stop_at_eos: bool = True,
    ) -> TokenStream: ...
