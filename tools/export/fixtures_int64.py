"""Programs exported with `VulkanPartitioner({"downcast_64_bit": False})`:
the delegate keeps int64 tensors (inputs, outputs, lifted constants and
intermediates) as int64 instead of narrowing them to int32 at export, so the
runtime has to hold them itself (`etwgpu_graph::retype::narrow_i64`).

- `int64_ops`: position arithmetic (arange, add, mul on int64, with a 0-dim
  int64 input), an embedding with int64 indices, argmax outputs, casts
  int64 <-> float32 and an int64 constant at the edges of the int32 range;
- `gpt2_decoder_i64`: the `gpt2_decoder` family program exported the same way.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn

from fixture_io import FixtureResult
from fixtures_nn import module_fixture, randn, seed

KEEP_64_BIT = {"downcast_64_bit": False}

# Values an int32 holds exactly at both ends of its range.
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


class Int64Ops(nn.Module):
    NAMES = ["ids + 3 * (arange(S) + start)", "arange(S) + start", "embedding(ids)",
             "x.argmax(-1)", "x.argmax(1, keepdim=True)", "ids.float() * 0.5", "x.long()",
             "ids + offsets", "(x.argmax(-1) * 2).float()"]

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 6)
        # The ends of the int32 range, reached exactly by ids + offsets.
        self.register_buffer("offsets", torch.tensor([I32_MIN, -7, 100_000, I32_MAX - 10, 0],
                                                     dtype=torch.int64))

    def forward(self, ids, start, x):
        pos = torch.arange(ids.shape[1]) + start
        top = x.argmax(-1)
        return (
            ids + pos * 3,
            pos,
            self.emb(ids),
            top,
            x.argmax(1, keepdim=True),
            ids.float() * 0.5,
            x.long(),
            ids + self.offsets,
            (top * 2).float(),
        )


def fx_int64_ops(verify: bool = True) -> FixtureResult:
    g = seed("int64_ops")
    ids = torch.randint(0, 11, (2, 5), generator=g)
    ids[0, 0], ids[1, 3] = 0, 10   # the ends that make ids + offsets reach the int32 limits
    start = torch.tensor(4)
    # Floats >= 0.05 from an integer so that x.long() truncation is unambiguous;
    # rows with distinct maxima (no argmax ties).
    x = randn(g, 2, 3, 5, scale=8.0)
    frac = x - torch.trunc(x)
    x = torch.where(frac.abs() < 0.05, x + 0.1, x)
    return module_fixture(
        "int64_ops",
        "int64 inside the delegate (VulkanPartitioner compile option downcast_64_bit=False): "
        "ids int64 [2,5] in [0,10], start int64 0-dim (4), x float32 [2,3,5]; offsets an "
        "int64 constant [-2^31, -7, 100000, 2^31-11, 0] (ids + offsets reaches both ends of "
        "int32); outputs in order: " + "; ".join(Int64Ops.NAMES) + ".",
        Int64Ops(), [(ids, start, x)], options=KEEP_64_BIT, verify=verify)


def fx_gpt2_decoder_i64(verify: bool = True) -> FixtureResult:
    from fixtures_families import Outputs, family_fixture
    from transformers import GPT2Config, GPT2LMHeadModel

    g = seed("gpt2_decoder_i64")
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2,
                        use_cache=False, attn_implementation="sdpa")
    model = Outputs(GPT2LMHeadModel(config), ("logits",))
    ids = torch.randint(0, 64, (1, 7), generator=g)
    return family_fixture(
        "gpt2_decoder_i64",
        "gpt2_decoder exported with downcast_64_bit=False (int64 position ids and token ids "
        "on the device): HF GPT2LMHeadModel (2 layers, n_embd 32, 2 heads, SDPA attention, "
        "no cache) on input_ids int64 [1,7]; output logits [1,7,64].",
        model, [(ids,)], options=KEEP_64_BIT, verify=verify)


FIXTURES: dict[str, Callable[..., FixtureResult]] = {
    "int64_ops": fx_int64_ops,
    "gpt2_decoder_i64": fx_gpt2_decoder_i64,
}
