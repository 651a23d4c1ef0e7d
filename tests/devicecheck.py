"""A CPU stand-in for a GPU's device checks. The model goes to torch's `meta` device (shapes, no data) and
each call runs under `OneDevice`, which fails any op mixing tensors of two devices as CUDA would (meta
alone lets a CPU index or id tensor through: `embedding(cpu_ids)` on meta weights works). Reading a meta
tensor back (`.cpu()`, `.tolist()`, `float()`, ...) gives zeros (True for booleans) instead of an error,
so a call runs to its end, as it would on a GPU."""
import contextlib

import torch
import torch.fx.experimental._config as fx_config
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

READS = {"tolist", "item", "__float__", "__int__", "__bool__", "__index__", "__format__"}


def _host_copy(t: torch.Tensor) -> torch.Tensor:
    """What copying a meta tensor to the CPU gives here: zeros, or True for a boolean tensor."""
    return torch.ones(t.shape, dtype=t.dtype) if t.dtype == torch.bool else torch.zeros(t.shape, dtype=t.dtype)


class OneDevice(TorchFunctionMode):
    """Fail an op whose tensors (bar CPU scalars, which CUDA accepts) or generator sit on two devices;
    let a meta tensor be read back to the host as `_host_copy`."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        this = args[0] if args and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta" else None
        if this is not None and name in READS:
            return func(_host_copy(this), *args[1:], **kwargs)
        if this is not None and name == "cpu":
            return _host_copy(this)
        if this is not None and name == "to":
            device, dtype, *_ = torch._C._nn._parse_to(*args[1:], **kwargs)
            if device is not None and device.type == "cpu":
                return _host_copy(this).to(dtype or this.dtype)
        devices = {x.device.type for x in pytree.tree_leaves((args, kwargs))
                   if isinstance(x, torch.Generator)
                   or isinstance(x, torch.Tensor) and not (x.device.type == "cpu" and x.dim() == 0)}
        if len(devices) > 1:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                               f"devices, {' and '.join(sorted(devices))} ({name})")
        return func(*args, **kwargs)


def _device_leaves(x, seen=None):
    """Tensors left off the CPU anywhere in a result (dicts, lists, dataclasses)."""
    seen = set() if seen is None else seen
    if id(x) in seen:
        return []
    seen.add(id(x))
    if isinstance(x, torch.Tensor):
        return [x] if x.device.type != "cpu" else []
    if isinstance(x, dict):
        return [t for v in x.values() for t in _device_leaves(v, seen)]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _device_leaves(v, seen)]
    if hasattr(x, "__dataclass_fields__"):
        return [t for k in x.__dataclass_fields__ for t in _device_leaves(getattr(x, k), seen)]
    return []


def _nonzero_on_meta():
    has = hasattr(fx_config, "meta_nonzero_assume_all_nonzero")  # torch 2.13 has it
    return fx_config.patch(meta_nonzero_assume_all_nonzero=True) if has else contextlib.nullcontext()


def assert_device_clean(fn, *args, **kwargs):
    """fn's result, run under OneDevice (and with a meta nonzero() taking every element as nonzero, so
    boolean masks work): it must run to its end and hand back no tensor on the model's device."""
    name = getattr(fn, "__name__", type(fn).__name__)
    try:
        with OneDevice(), _nonzero_on_meta():
            out = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - any failure, above all a device mismatch, is the bug looked for
        raise AssertionError(f"{name} is not device-clean: {type(e).__name__}: {e}") from e
    assert not _device_leaves(out), f"{name} handed back a tensor on the model's device"
    return out
