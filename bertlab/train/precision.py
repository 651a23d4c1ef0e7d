"""Whether bfloat16 autocast pays off here. CPUs without native bf16 (AVX2 only) emulate it ~100x
slower than fp32, so we time one small matmul both ways, once per process."""
from __future__ import annotations

import functools
import timeit

import torch


def _best_of(fn) -> float:
    fn()  # warm-up: first calls pick kernels
    return min(timeit.repeat(fn, number=1, repeat=3))


@functools.cache
def bf16_is_fast(device_type: str = "cpu") -> bool:
    if device_type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device_type != "cpu":
        return True
    a, b = torch.randn(256, 512), torch.randn(512, 512)
    a16, b16 = a.bfloat16(), b.bfloat16()
    return _best_of(lambda: a16 @ b16) < 1.5 * _best_of(lambda: a @ b)


def slow_bf16_note() -> str:
    return (f"bf16 asked for, but this CPU ({torch.backends.cpu.get_cpu_capability()}) has no fast "
            "bfloat16 arithmetic: training in fp32 instead, which is faster here")
