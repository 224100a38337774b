"""Training ops: a LoRA-like adapter over a frozen 4-bit base linear.

Two kinds of goldens:

- `train_lora_grad` (a fixture of `export_all.py`): one forward and
  backward of the adapter exported with `VulkanPartitioner` (`et_vk.fused_ce`,
  `et_vk.linear_dW`; the base dequantized to a float linear, see
  `LoraGrad`), outputs from the ops' eager reference implementations
  (`executorch.backends.vulkan.custom_ops_lib`).
- `test_data/train/` (this script's `main`): `et_vk.adamw_step`,
  `et_vk.linear_q4gsw_backward` and `et_vk.q4gsw_requant` cannot be exported
  with executorch 1.5.1 (functionalization refuses adamw_step's aliased
  outputs; the partitioner's float-only dtype rule refuses the uint8 weight
  of the other two), so the Rust tests build those graphs with the format
  writer (`crates/runtime/tests/it/train.rs`) and compare with the numbers
  written here: one golden case per op, from the ops' eager reference
  implementations, and a three-step AdamW training run of the adapter whose
  losses, input gradients, parameters and moments come from PyTorch's own
  autograd and `torch.optim.AdamW`.

Run: `.venv-export/bin/python tools/export/fixtures_train.py` (seconds).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

HERE = Path(__file__).resolve().parent
TRAIN_DIR = HERE.parents[1] / "test_data" / "train"

# The adapter and its data: x [M, K] through a frozen 4-bit W [N, K] (group
# GS) plus B @ A (rank R), cross-entropy over N classes.
M, K, N, R, GS = 8, 64, 16, 4, 32
# AdamW hyperparameters of the training run.
LR, BETAS, EPS, WD, STEPS = 1e-2, (0.9, 0.999), 1e-8, 0.1, 3


def _ops():
    import executorch.backends.vulkan.custom_ops_lib  # noqa: F401  (registers torch.ops.et_vk)

    return torch.ops.et_vk


def _gen(name: str) -> torch.Generator:
    from fixtures_nn import seed

    return seed(name)


def q4_weight(g: torch.Generator, n: int, k: int, gs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random packed codes u8 [n, ceil(k/2)] (k = 2j in the low nibble) and
    scales [ceil(k/gs), n]."""
    codes = torch.randint(0, 16, (n, k), generator=g, dtype=torch.int32)
    if k % 2:
        codes = torch.cat([codes, torch.zeros(n, 1, dtype=torch.int32)], dim=1)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8)
    scales = torch.rand(-(-k // gs), n, generator=g) * 0.04 + 0.02
    return packed, scales


def dequant(packed: torch.Tensor, scales: torch.Tensor, k: int, gs: int) -> torch.Tensor:
    """The f32 weight [n, k] of packed codes at group scales, as linear_q4gsw."""
    low = (packed & 0xF).to(torch.int32)
    high = (packed >> 4).to(torch.int32)
    codes = torch.stack([low, high], dim=-1).reshape(packed.shape[0], -1)[:, :k] - 8
    group = torch.arange(k) // gs
    return codes.to(torch.float32) * scales.t()[:, group]


def adapter_data():
    """x, labels (one row ignored), the base weight and the adapter's
    initial A [R, K] and B [N, R] (B nonzero, so A moves from step 1)."""
    g = _gen("train_lora")
    x = torch.randn(M, K, generator=g)
    labels = torch.randint(0, N, (M,), generator=g, dtype=torch.int32)
    labels[3] = -1
    w, s = q4_weight(g, N, K, GS)
    a = torch.randn(R, K, generator=g) * 0.1
    b = torch.randn(N, R, generator=g) * 0.1
    return x, labels, w, s, a, b


class LoraGrad(nn.Module):
    """One forward and backward of the adapter: loss, dlogits, dA, dB. The
    base is the dequantized 4-bit weight as a float linear: the partitioner
    of executorch 1.5.1 takes `et_vk.linear_q4gsw` only from its own
    quantization passes, not as a call in the exported program (its
    float-only dtype rule refuses the uint8 weight)."""

    def __init__(self, w: torch.Tensor, s: torch.Tensor, n_valid: float):
        super().__init__()
        self.register_buffer("w", dequant(w, s, K, GS))
        self.n_valid = n_valid

    def forward(self, x, labels, a, b):
        et = torch.ops.et_vk
        h = torch.nn.functional.linear(x, a)
        logits = torch.nn.functional.linear(x, self.w) + torch.nn.functional.linear(h, b)
        loss, dlogits = et.fused_ce(logits, labels, self.n_valid)
        db = et.linear_dW(dlogits, h)
        da = et.linear_dW(torch.mm(dlogits, b), x)
        return loss, dlogits, da, db


def fx_train_lora_grad(verify: bool = True):
    del verify  # the et_vk ops have no portable CPU kernels to cross-check with
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from fixture_io import Call, FixtureResult

    _ops()
    x, labels, w, s, a, b = adapter_data()
    n_valid = float((labels >= 0).sum())
    model = LoraGrad(w, s, n_valid)
    ins = (x, labels, a, b)
    ep = torch.export.export(model, ins, strict=False)
    lowered = to_edge_transform_and_lower(
        ep, compile_config=EdgeCompileConfig(_skip_dim_order=False), partitioner=[VulkanPartitioner({})])
    with torch.no_grad():
        outs = list(model(*[t.clone() for t in ins]))
    # The eager reference ops agree with autograd through the dequantized base.
    ref = _autograd_step(x, labels, w, s, a, b)
    for got, want, name in ((outs[0], ref["loss"], "loss"), (outs[2], ref["da"], "dA"), (outs[3], ref["db"], "dB")):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=f"{name}: custom op vs autograd")
    return FixtureResult(
        name="train_lora_grad",
        description=(f"LoRA-like adapter over a frozen 4-bit base: x [{M},{K}] -> linear with the "
                     f"dequantized group-{GS} weight + (x A^T) B^T, rank {R}, then et_vk.fused_ce over {N} classes "
                     f"(one label -1) and the adapter's weight gradients by et_vk.linear_dW."),
        export={"api": "torch.export.export(strict=False) -> to_edge_transform_and_lower"
                       "(VulkanPartitioner)", "options": {}},
        pte=lowered.to_executorch().buffer,
        calls=[Call(inputs=list(ins), outputs=outs)],
        notes=["goldens: custom_ops_lib reference ops, checked against autograd"],
    )


def _autograd_step(x, labels, w, s, a, b):
    """Loss and gradients of one step by autograd through dequant(W)."""
    wd = dequant(w, s, K, GS)
    x = x.clone().requires_grad_(True)
    a = a.clone().requires_grad_(True)
    b = b.clone().requires_grad_(True)
    logits = x @ wd.t() + (x @ a.t()) @ b.t()
    loss = torch.nn.functional.cross_entropy(logits, labels.long(), ignore_index=-1)
    loss.backward()
    return {"loss": loss.detach(), "dx": x.grad, "da": a.grad, "db": b.grad}


def train_run() -> dict[str, np.ndarray]:
    """STEPS AdamW steps of the adapter by PyTorch autograd and torch.optim.AdamW."""
    x, labels, w, s, a0, b0 = adapter_data()
    wd = dequant(w, s, K, GS)
    a = a0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    opt = torch.optim.AdamW([a, b], lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    out: dict[str, np.ndarray] = {
        "x": x.numpy(), "labels": labels.numpy(), "w": w.numpy(), "scales": s.numpy(),
        "a0": a0.numpy(), "b0": b0.numpy(),
    }
    losses, dxs = [], []
    for _ in range(STEPS):
        xg = x.clone().requires_grad_(True)
        opt.zero_grad()
        logits = xg @ wd.t() + (xg @ a.t()) @ b.t()
        loss = torch.nn.functional.cross_entropy(logits, labels.long(), ignore_index=-1)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        dxs.append(xg.grad.numpy())
    out["losses"] = np.array(losses, dtype=np.float32)
    out["dx"] = np.stack(dxs)
    out["a"] = a.detach().numpy()
    out["b"] = b.detach().numpy()
    for name, p in (("a", a), ("b", b)):
        st = opt.state[p]
        out[f"m_{name}"] = st["exp_avg"].numpy()
        out[f"v_{name}"] = st["exp_avg_sq"].numpy()
    return out


def op_cases() -> dict[str, np.ndarray]:
    """One golden case per op the exporter cannot carry, from the eager
    reference implementations of custom_ops_lib."""
    et = _ops()
    g = _gen("train_ops")
    out: dict[str, np.ndarray] = {}
    # adamw_step at step 3 (bias corrections 1 - beta^3), 37 elements.
    p, m, v, grad = (torch.randn(37, generator=g) for _ in range(4))
    m, v = m * 0.1, v.abs() * 0.01
    out.update(adamw_param=p.numpy().copy(), adamw_m=m.numpy().copy(), adamw_v=v.numpy().copy(),
               adamw_grad=grad.numpy())
    et.adamw_step(p, m, v, grad, 1e-2, 0.9, 0.999, 1e-8, 0.1, 1 - 0.9 ** 3, 1 - 0.999 ** 3)
    out.update(adamw_param_out=p.numpy(), adamw_m_out=m.numpy(), adamw_v_out=v.numpy())
    # linear_q4gsw_backward: d_out [3, 16] through W [16, 80] (group 16).
    w, s = q4_weight(g, 16, 80, 16)
    d = torch.randn(3, 16, generator=g)
    out.update(bwd_d_out=d.numpy(), bwd_w=w.numpy(), bwd_scales=s.numpy(),
               bwd_d_x=et.linear_q4gsw_backward(d, w, s, 16).numpy())
    # q4gsw_requant: latent [12, 37] (odd K), group 8; group 1 has
    # power-of-two scales and latents on exact halves (ties round to even),
    # one scale is 0, and the values overflow the 4-bit range both ways.
    n, k, gs = 12, 37, 8
    _, s = q4_weight(g, n, k, gs)
    s[1] = 0.125
    s[2, 5] = 0.0
    latent = torch.randn(n, k, generator=g) * 0.2
    latent[:, 8:16] = (torch.randint(-20, 20, (n, 8), generator=g) + 0.5) * 0.125
    out.update(rq_latent=latent.numpy(), rq_scales=s.numpy(),
               rq_packed=et.q4gsw_requant(latent, s, gs).numpy())
    return out


def main() -> int:
    sys.dont_write_bytecode = True
    sys.path.insert(0, str(HERE))
    TRAIN_DIR.mkdir(parents=True, exist_ok=True)
    arrays = {**{f"run_{k}": v for k, v in train_run().items()}, **op_cases()}
    for name, arr in sorted(arrays.items()):
        np.save(TRAIN_DIR / f"{name}.npy", np.ascontiguousarray(arr), allow_pickle=False)
    meta = {
        "adapter": {"M": M, "K": K, "N": N, "R": R, "group_size": GS},
        "adamw": {"lr": LR, "betas": list(BETAS), "eps": EPS, "weight_decay": WD, "steps": STEPS},
        "files": sorted(f"{n}.npy" for n in arrays),
    }
    (TRAIN_DIR / "train.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {len(arrays)} arrays to {TRAIN_DIR}")
    return 0


FIXTURES = {
    "train_lora_grad": fx_train_lora_grad,
}

if __name__ == "__main__":
    sys.exit(main())
