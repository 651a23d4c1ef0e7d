"""Opt-in speed-ups for CPU inference: `fast.optimize(model)` (in place, idempotent, returns the model).

model.py stays plain. `optimize` swaps a few of its modules for subclasses (same parameters, same
state dict) whose forward, on a pure-inference call, runs
  1. one GEMM against [Wq; Wk; Wv] instead of three;
  2. oneDNN GEMMs against weights packed once into its blocked layout, which beat torch's own
     matmul on this CPU, with GELU / ReLU fused into the intermediate GEMM;
  3. the residual add fused into the output GEMM (in place into its fresh result without oneDNN).
BERT-base 8x128 fp32 (bench/bench_core.py, 2 threads, a busy machine): ~0.75x transformers' time,
against ~1.0x for the plain model; the fused QKV alone gains little here, the packed GEMMs most.
Outputs equal the plain model's within 1e-5 (fp32 sums in another order).

Why each trick is safe
* Only pure inference takes it: autograd off (no_grad or inference_mode), eval mode (dropout is
  the identity, so the residual may join the GEMM), CPU, fp32 input and weights, no autocast, not
  under torch.compile, and plain nn.Linear children. Anything else (training, .half(), bf16
  autocast, a GPU, a LoRA layer) runs the model's own forward.
* A cache entry is never stale. It records, for each tensor it was built from, its storage object
  (held by a weak reference, so no other storage can take that address while we hold it, yet the
  memory is freed as usual: a data pointer alone can come back for a new tensor), data pointer,
  version counter, dtype, shape and strides, and is rebuilt when any differs.
  Writes through autograd's view of a tensor bump its version (optimizer steps, load_state_dict's
  copy_, initialisation under no_grad); .to() / .half() / .float(), load_state_dict(assign=True) and
  replaced parameters bring another storage; bertlab.methods' LoRA, IA3 and adapters replace the Linear (so: the plain path).
* Inference tensors (weights created under inference_mode) have no version counter: such weights
  take the plain path. Inputs may be inference tensors, and packing may happen under
  inference_mode: the packed weights are only ever read, never written or saved for backward.
* Writes that bypass the version counter (`p.data.add_()`, a numpy view) are not seen: call
  `optimize(model)` again after them; it drops every cache.
* Thread-safe: an entry is one tuple, read once and replaced whole (two threads may pack twice).
* The caches are not in the state dict, and deepcopy / pickling drop them.
* The oneDNN ops are private: they are checked once against F.linear at import, and when missing
  or different (or torch.backends.mkldnn.enabled is False) only the fused QKV, with F.linear, is used.
Cost: the packed copies hold the linear weights a second time (BERT-base: about +0.4 GB).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.multiprocessing.reductions import StorageWeakRef

from .model import (
    BertIntermediate,
    BertLMPredictionHead,
    BertPredictionHeadTransform,
    BertSelfAttention,
    BertSelfOutput,
    device_of,
)


def _onednn_works() -> bool:
    """The packed oneDNN linear computes F.linear's numbers, with each post-op we fuse into it."""
    try:
        with torch.no_grad():
            g = torch.Generator().manual_seed(0)
            x, w, b, r = (torch.randn(s, generator=g) for s in ((5, 8), (6, 8), (6,), (5, 6)))
            pw, y = torch.ops.mkldnn._reorder_linear_weight(w), F.linear(x, w, b)
            pairs = [(torch.ops.mkldnn._linear_pointwise.binary(x, r, pw, b, "add"), y + r)]
            for attr, algo, f in (("none", "", lambda y: y), ("relu", "", F.relu), ("gelu", "none", F.gelu),
                                  ("gelu", "tanh", lambda y: F.gelu(y, approximate="tanh"))):
                pairs.append((torch.ops.mkldnn._linear_pointwise(x, pw, b, attr, [], algo), f(y)))
            return all(torch.allclose(a, e, atol=1e-5) for a, e in pairs)
    except Exception:  # a private op missing, renamed or unsupported here: go without
        return False


ONEDNN = torch.backends.mkldnn.is_available() and _onednn_works()


class _Cache(dict):
    """Packed weights by name, beside (not in) the module's state; copies start empty."""

    def __deepcopy__(self, memo):
        return _Cache()

    def __reduce__(self):
        return _Cache, ()


def _plain_tensor(t) -> bool:
    return (type(t) in (torch.Tensor, nn.Parameter) and t.device.type == "cpu" and t.dtype == torch.float32
            and t.layout == torch.strided and not t.is_inference())


def _inference_call(module: nn.Module, x, linears) -> bool:
    """True when this call may take the fast path (see the module docstring)."""
    if (torch.is_grad_enabled() or module.training or x.device.type != "cpu" or x.dtype != torch.float32
            or x.numel() == 0 or torch.is_autocast_enabled("cpu") or torch.compiler.is_compiling()):
        return False
    return all(type(m) is nn.Linear and _plain_tensor(m.weight) and (m.bias is None or _plain_tensor(m.bias))
               for m in linears)


def _stamp(tensors) -> tuple:
    return tuple((t.untyped_storage()._cdata, t.data_ptr(), t._version, t.dtype, t.shape, t.stride())
                 for t in tensors)


def _packed(owner: nn.Module, name: str, weights, biases, onednn: bool):
    """(weight, bias) for the kernel, from `weights` and `biases` stacked along the outputs; cached."""
    tensors = [t for t in (*weights, *biases) if t is not None]
    stamp = _stamp(tensors) + (onednn,)
    entry = owner._fast.get(name)
    if entry is None or entry[0] != stamp:
        w = torch.cat(weights) if len(weights) > 1 else weights[0].detach()
        b = None if biases[0] is None else torch.cat(biases) if len(biases) > 1 else biases[0].detach()
        if onednn:
            w = torch.ops.mkldnn._reorder_linear_weight(w)  # a copy in oneDNN's blocked layout
        entry = (stamp, [StorageWeakRef(t.untyped_storage()) for t in tensors], w, b)
        owner._fast[name] = entry  # one assignment: a concurrent reader sees the old or the new entry
    return entry[2], entry[3]


def _fused_act(act: nn.Module | None):
    """oneDNN's (attr, algorithm) for an activation it can fuse into the GEMM, else None."""
    if act is None:
        return "none", ""
    if type(act) is nn.GELU:
        return "gelu", act.approximate  # "none" (erf) or "tanh"
    return ("relu", "") if type(act) is nn.ReLU else None


def _linear(owner, name, x, weights, biases, act: nn.Module | None = None, residual=None):
    """act(x Wᵀ + b) + residual against packed weights, the activation or the add fused into oneDNN's
    GEMM where it can (x (..., in) -> (..., out))."""
    onednn = ONEDNN and torch.backends.mkldnn.enabled
    w, b = _packed(owner, name, weights, biases, onednn)
    if onednn and residual is not None and act is None:
        return torch.ops.mkldnn._linear_pointwise.binary(x.contiguous(), residual.contiguous(), w, b, "add")
    if not onednn:
        y = F.linear(x, w, b)
        y = y if act is None else act(y)
    elif (fused := _fused_act(act)) is not None:
        y = torch.ops.mkldnn._linear_pointwise(x.contiguous(), w, b, fused[0], [], fused[1])
    else:  # an activation oneDNN does not know
        y = act(torch.ops.mkldnn._linear_pointwise(x.contiguous(), w, b, "none", [], ""))
    return y if residual is None else y.add_(residual)  # y is a fresh tensor: add in place


class FastSelfAttention(BertSelfAttention):
    def forward(self, x, bias, need_weights: bool, prefix=None):
        lins = (self.query, self.key, self.value)
        if not _inference_call(self, x, lins) or any(m.bias is None for m in lins) or prefix is not None:
            return super().forward(x, bias, need_weights, prefix)
        qkv = _linear(self, "qkv", x, [m.weight for m in lins], [m.bias for m in lins])  # (B, T, 3H)
        return self.attend(*qkv.chunk(3, dim=-1), bias, need_weights)


class FastSelfOutput(BertSelfOutput):
    def forward(self, h, residual):
        if not _inference_call(self, h, [self.dense]):
            return super().forward(h, residual)
        y = _linear(self, "dense", h, [self.dense.weight], [self.dense.bias], residual=residual)  # eval: no dropout
        return self.LayerNorm(y)


class FastIntermediate(BertIntermediate):
    def forward(self, x):
        if not _inference_call(self, x, [self.dense]):
            return super().forward(x)
        return _linear(self, "dense", x, [self.dense.weight], [self.dense.bias], self.act)  # (B, T, I)


class FastPredictionHeadTransform(BertPredictionHeadTransform):
    def forward(self, h):
        if not _inference_call(self, h, [self.dense]):
            return super().forward(h)
        return self.LayerNorm(_linear(self, "dense", h, [self.dense.weight], [self.dense.bias], self.act))


class FastLMPredictionHead(BertLMPredictionHead):
    def forward(self, h):
        if not (_inference_call(self, h, [self.decoder]) and _plain_tensor(self.bias)):
            return super().forward(h)
        return _linear(self, "decoder", self.transform(h), [self.decoder.weight], [self.bias])  # (..., V)


FAST = {BertSelfAttention: FastSelfAttention, BertSelfOutput: FastSelfOutput, BertIntermediate: FastIntermediate,
        BertPredictionHeadTransform: FastPredictionHeadTransform, BertLMPredictionHead: FastLMPredictionHead}


def optimize(model: nn.Module) -> nn.Module:
    """Give `model`'s BERT modules the fast inference path (in place) and drop every packed weight.
    Idempotent; call it again after writing weights behind autograd's back (`p.data`). A model off
    the CPU is returned unchanged: the oneDNN path is CPU-only."""
    if device_of(model).type != "cpu":
        return model
    for m in model.modules():
        if type(m) in FAST:
            m.__class__ = FAST[type(m)]
        if type(m) in FAST.values():
            m._fast = _Cache()
    return model


def is_optimized(model: nn.Module) -> bool:
    return any(type(m) in FAST.values() for m in model.modules())
