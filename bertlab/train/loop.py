"""A small, model-agnostic training loop (minGPT-style) whose runs survive a stop, a crash or a kill.

The newest checkpoint holds everything a run needs to go on bit for bit: weights, AdamW and
schedule state, every RNG stream (dropout!) and the batch source's position. So stopping and
resuming ends with exactly the parameters of an uninterrupted run with the same seed.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist
from torch.optim.lr_scheduler import LambdaLR

from ..checkpoint import load_weights, save_weights
from . import runs
from .precision import bf16_is_fast, slow_bf16_note
from .prefetch import Prefetcher
from .runs import rng_state, seed_everything, set_rng_state
from .specs import TrainArgs

# On resume these come from the run's train_args.json (changing them mid-run breaks the schedule
# or the data order); `steps` may only grow. Everything else (logging, device, ...) is the caller's.
RESUME_FIXED = ("lr", "warmup", "weight_decay", "betas", "eps", "clip", "accum", "seed")


def lr_lambda(steps: int, warmup_steps: int) -> Callable[[int], float]:
    """Linear warmup from 0, then linear decay to 0 at `steps` (HF's get_linear_schedule_with_warmup).
    A closure, not an object, so LambdaLR's state_dict leaves it out and a resume may extend steps."""
    def f(s: int) -> float:
        if s < warmup_steps:
            return s / warmup_steps
        return max(0.0, (steps - s) / max(1, steps - warmup_steps))
    return f


def early_evals(until: int, every: int) -> set[int]:
    """Steps 10, 25, 50, 100, 250, 500, ... up to `until` and before the first regular evaluation at
    `every`: the start of a run, where the curves move most, gets points of its own."""
    steps, k = set(), 0
    while (s := (10, 25, 50)[k % 3] * 10 ** (k // 3)) <= until:
        if s < every:
            steps.add(s)
        k += 1
    return steps


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Decay matrices only: shrinking biases or LayerNorm gains towards 0 regularises nothing useful."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [{"params": [(n, p) for n, p in named if p.ndim >= 2], "weight_decay": weight_decay},
              {"params": [(n, p) for n, p in named if p.ndim < 2], "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]  # names land in group["param_names"]


# ---- RNG, devices, batches --------------------------------------------------------------------

def resolve_device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} asked for, but PyTorch sees no CUDA GPU; use 'cpu'")
        if name == "cuda" and dist.is_initialized():
            name = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    return torch.device(name)


def init_distributed(backend: str | None = None) -> tuple[int, int]:
    """Join the process group torchrun describes in the environment (gloo on CPU, NCCL on GPU);
    (0, 1) when started plainly."""
    if dist.is_available() and not dist.is_initialized() and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        cuda = torch.cuda.is_available() and backend != "gloo"
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group(backend or ("nccl" if cuda else "gloo"))
    return rank_world()


def rank_world() -> tuple[int, int]:
    """(rank, world size) of the process group, (0, 1) without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _to(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, dict):
        return {k: _to(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to(v, device) for v in batch)
    return batch.to(device, non_blocking=True) if torch.is_tensor(batch) else batch


def _tokens(batch: Any) -> int:
    """Non-pad tokens, for tokens/s: attention_mask if present, else every input id."""
    b = batch if isinstance(batch, dict) else {}
    if torch.is_tensor(b.get("attention_mask")):
        return int(b["attention_mask"].sum())
    return b["input_ids"].numel() if torch.is_tensor(b.get("input_ids")) else 0


# ---- the trainer ------------------------------------------------------------------------------

class Trainer:
    """Run `compute_loss(model, batch) -> (loss, {name: float or 0-d tensor})` over `batches` for `args.steps`
    AdamW steps, logging, evaluating and checkpointing into `run_dir` (see runs.py)."""
    # Batches built by a worker process ahead of the step, and losses checked once a log row instead of each step:
    # None = on a GPU only (on a CPU both only take cores from the step). Tests switch them on for the CPU.
    prefetch: bool | None = None
    lazy_checks: bool | None = None

    def __init__(self, model: torch.nn.Module, batches, args: TrainArgs, run_dir: str | os.PathLike,
                 compute_loss: Callable, evaluate: Callable | None = None, on_save: Callable | None = None,
                 log_fn: Callable[[str], None] | None = None, *, on_load: Callable | None = None,
                 stop_event: threading.Event | None = None, find_unused_parameters: bool = True,
                 callbacks: Sequence[Callable[[dict], None]] = ()):
        self.batches, self.args, self.run_dir = batches, args.train_args(), Path(run_dir)
        self.callbacks = list(callbacks)  # each gets every row: {"event": "train" | "eval" | "status", ...}
        self.compute_loss, self.evaluate, self.log_fn, self.stop_event = compute_loss, evaluate, log_fn, stop_event
        self.on_save, self.on_load = on_save or save_weights, on_load or load_weights
        self.find_unused_parameters = find_unused_parameters  # heads outside the loss (MLM-only: NSP)
        self.rank, self.world = rank_world()
        self.device = resolve_device(args.device)
        nccl = self.world > 1 and dist.get_backend() == "nccl"
        self.comm_device = self.device if nccl else torch.device("cpu")
        self.model = model.to(self.device)
        if args.bf16 and not bf16_is_fast(self.device.type):  # emulated bf16 is far slower than fp32
            self._say(slow_bf16_note())
            self.args = replace(self.args, bf16=False)
        self.step, self.elapsed, self.started = 0, 0.0, time.time()
        self._build()

    def param_groups(self) -> list[dict]:
        """AdamW's groups; a subclass may give layers their own learning rates."""
        return param_groups(self.model, self.args.weight_decay)

    def before_step(self) -> None:
        """Called before every optimizer step (self.step steps done); a hook for schedules such as
        gradual unfreezing. It must depend on self.step alone, so a resumed run behaves the same."""

    def _build(self) -> None:
        a = self.args
        fused = {"fused": True} if self.device.type == "cuda" else {}  # one kernel for every tensor's update
        self.optimizer = torch.optim.AdamW(self.param_groups(), lr=a.lr, betas=a.betas, eps=a.eps, **fused)
        self.lr_fn = lr_lambda(a.steps, a.warmup_steps)
        self.scheduler = LambdaLR(self.optimizer, self.lr_fn)

    def _say(self, msg: str) -> None:
        if self.log_fn is not None and self.rank == 0:
            self.log_fn(msg)

    def _status(self, state: str, message: str = "") -> dict:
        st = dict(state=state, step=self.step, total_steps=self.args.steps, message=message,
                  pid=os.getpid(), started=self.started, elapsed=round(self._now(), 3))
        if self.rank != 0:
            return st
        self._emit({"event": "status", **st})
        return runs.write_status(self.run_dir, **st)

    def _emit(self, row: dict) -> None:
        """Hand a structured row to every callback (rank 0): progress bars and UIs read these, not log text."""
        for cb in self.callbacks:
            cb(row)

    def _eta(self) -> float | None:
        done = self.step - getattr(self, "_step0", 0)
        return None if done < 1 else round((time.monotonic() - self._t0) / done * (self.args.steps - self.step), 1)

    def _now(self) -> float:
        return self.elapsed + (time.monotonic() - self._t0 if hasattr(self, "_t0") else 0.0)

    def fit(self, resume: bool = False) -> dict:
        """Train to `args.steps` (resume=True: from the newest complete checkpoint, if any).
        Returns the final status; "failed" on a non-finite loss; other errors are re-raised."""
        with runs.RunLock(self.run_dir) if self.rank == 0 else contextlib.nullcontext():
            ckpt = runs.latest_checkpoint(self.run_dir)
            if ckpt is not None and not resume:  # refuse before touching the run's status
                raise ValueError(f"run {self.run_dir.name} already has checkpoints (newest {ckpt.name}): "
                                 f"resume it, or delete the folder to start over")
            try:
                return self._fit(resume)
            except BaseException as e:
                if self.rank == 0:
                    self._status("failed", f"{type(e).__name__}: {e}")
                raise

    def _prepare(self, resume: bool) -> Path | None:
        rd, a = self.run_dir, self.args
        ckpt = runs.latest_checkpoint(rd) if resume else None
        stored = runs.read_args(rd) if ckpt is not None else None
        if stored:  # the run's own schedule wins; steps may only grow
            kept = {k: stored[k] for k in RESUME_FIXED if k in stored}
            changed = [k for k, v in kept.items() if json.dumps(v) != json.dumps(a.to_dict()[k])]
            old = int(stored.get("steps", a.steps))
            steps = max(a.steps, old)
            if changed or steps > old:
                self._say(f"resuming with the run's own {', '.join(changed) or 'settings'}; steps {old} -> {steps}")
            self.args = replace(a, **kept, steps=steps)
            self._build()
        if self.rank == 0:
            runs.prepare_run(rd, self.args.to_dict(), None if ckpt is None else runs.checkpoint_step(ckpt))
        return ckpt

    def _load(self, ckpt: Path) -> None:
        self.on_load(self.model, ckpt)
        self.optimizer.load_state_dict(torch.load(ckpt / "optimizer.pt", map_location=self.device, weights_only=True))
        self.scheduler.load_state_dict(torch.load(ckpt / "scheduler.pt", weights_only=True))
        for g, base in zip(self.optimizer.param_groups, self.scheduler.base_lrs):  # steps may have grown
            g["lr"] = base * self.lr_fn(self.scheduler.last_epoch)
        st = json.loads((ckpt / runs.COMPLETE).read_text())
        self.step, self.elapsed = int(st["step"]), float(st["elapsed"])
        bs = torch.load(ckpt / st["batches_file"], weights_only=True) if "batches_file" in st else st.get("batches")
        if bs is not None and hasattr(self.batches, "load_state_dict"):
            self.batches.load_state_dict(bs)
        rngs = torch.load(ckpt / "rng.pt", weights_only=True)  # one per rank
        if len(rngs) == self.world:
            set_rng_state(rngs[self.rank])
        else:
            self._say(f"saved with {len(rngs)} processes, resumed with {self.world}: RNG streams reseeded")
            seed_everything(self.args.seed + self.rank + 1_000_003 * self.step)
        self._say(f"resumed from {ckpt} at step {self.step}")

    # -- the loop --
    def _fit(self, resume: bool) -> dict:
        ckpt = self._prepare(resume)
        a = self.args
        seed_everything(a.seed + self.rank)  # ranks drop out different units
        if ckpt is not None:
            self._load(ckpt)
        self._t0, self._step0 = time.monotonic(), self.step
        self._saved_at = self._t0  # checkpoints come by steps and by time (save_every_s)
        if self.step >= a.steps:
            return self._status("finished", f"already at step {self.step} of {a.steps}")
        model = self.model
        if self.world > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = DDP(self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                        find_unused_parameters=self.find_unused_parameters)
        if a.compile:
            model = torch.compile(model)  # the same parameters: checkpoints and evaluations use self.model
        self.model.train()
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        self._status("running")
        # On a GPU, a worker process builds and pins batches ahead of the step, and values are read once a
        # log row; on the CPU both would only take cores from the step, so every step is checked at once.
        gpu = self.device.type == "cuda"
        self.source = Prefetcher(self.batches) if (gpu if self.prefetch is None else self.prefetch) else self.batches
        lazy = (gpu if self.lazy_checks is None else self.lazy_checks) and self.world == 1
        it, acc = iter(self.source), _Interval(self.device)
        early = early_evals(a.eval_early, a.eval_every)
        try:
            while self.step < a.steps:
                t = time.monotonic()
                self.before_step()
                loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
                for micro in range(a.accum):
                    batch, it = self._next(it)
                    acc.tokens += _tokens(batch)
                    batch = _to(batch, self.device)
                    sync = model is self.model or micro == a.accum - 1
                    with contextlib.nullcontext() if sync else model.no_sync():
                        with torch.autocast(self.device.type, torch.bfloat16, enabled=a.bf16):
                            loss, metrics = self.compute_loss(model, batch)
                        (loss / a.accum).backward()
                    loss_sum += loss.detach().double()
                    acc.add_metrics(metrics)
                gn = torch.nn.utils.clip_grad_norm_(params, a.clip if a.clip > 0 else math.inf).detach().double()
                loss_avg = loss_sum / a.accum
                stop = (self.rank == 0 and runs.stop_requested(self.run_dir)) or \
                    bool(self.stop_event is not None and self.stop_event.is_set()) or self.step + 1 == a.stop_at
                final = self.step + 1 == a.steps
                n = self.step + 1
                timed = bool(a.save_every_s) and time.monotonic() - self._saved_at >= a.save_every_s
                due = (n % a.log_every == 0 or n % a.save_every == 0 or final or stop or timed
                       or (self.evaluate is not None and (n % a.eval_every == 0 or n in early)))
                acc.note_finite(torch.isfinite(loss_avg) & torch.isfinite(gn), loss_avg, gn)
                if due or not lazy:  # lazy: read at the next row; a bad step only spoils weights no file holds
                    bad, stop, timed = self._agree(not acc.all_finite(), stop, timed)
                    if bad:
                        return self._fail(acc, lazy)
                lr = self.optimizer.param_groups[0]["lr"]
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.step += 1
                acc.add_step(loss_avg, gn, lr, time.monotonic() - t)
                if self.step % a.log_every == 0 or final or stop:
                    self._log(acc)
                    acc = _Interval(self.device)
                if self.evaluate is not None and (self.step % a.eval_every == 0 or final or self.step in early):
                    self._eval()
                if self.step % a.save_every == 0 or final or stop or timed:
                    if stop and not final:
                        self._status("stopping")
                    self._save()
                if stop and not final:
                    self._say(f"stopped at step {self.step}")
                    return self._finish("stopped", f"stopped at step {self.step}; resume to continue")
        finally:
            if self.source is not self.batches:
                self.source.close()
        return self._finish("finished", "")

    def _fail(self, acc: "_Interval", lazy: bool) -> dict:
        """A non-finite loss or gradient norm: no step is taken with it, nothing is saved after it."""
        self.optimizer.zero_grad(set_to_none=True)
        loss, gn = acc.last_bad()
        what, v = ("loss", loss) if not math.isfinite(loss) else ("gradient norm", gn)
        when = f"by step {self.step + 1}" if lazy else f"at step {self.step + 1}"
        msg = (f"{what} became {v} {when}; try a lower learning rate or bf16 off "
               f"(the last good checkpoint is kept)")
        self._say(msg)
        return self._status("failed", msg)

    def _finish(self, state: str, message: str) -> dict:
        if self.rank == 0:
            runs.clear_stop(self.run_dir)  # a request that came too late to matter, too
        st = self._status(state, message)
        if self.world > 1:
            dist.barrier()  # every rank returns after rank 0 has written the checkpoint
        return st

    def _next(self, it):
        """The next batch; an exhausted iterator means an epoch ended: start the next one."""
        for _ in range(2):
            try:
                return next(it), it
            except StopIteration:
                it = iter(self.batches)
        raise ValueError("the batch source yielded no batches")

    def _agree(self, bad: bool, stop: bool, save: bool = False) -> tuple[bool, bool, bool]:
        """All ranks fail, stop or save (a checkpoint by time) at the same step, or the others would wait
        forever."""
        if self.world == 1:
            return bad, stop, save
        flags = torch.tensor([float(bad), float(stop), float(save)], device=self.comm_device)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        return bool(flags[0]), bool(flags[1]), bool(flags[2])

    def _log(self, acc: "_Interval") -> None:
        keys, means = acc.metric_means()  # one read of the device for the whole row
        vals = [float(acc.loss), float(acc.grad_norm), acc.tokens] + means
        if self.world > 1:  # average over ranks; compute_loss must return the same keys on every rank
            t = torch.tensor(vals, dtype=torch.float64, device=self.comm_device)
            dist.all_reduce(t)
            vals = [v / self.world for v in t.tolist()]
            vals[2] *= self.world  # tokens add up
        if self.rank != 0:
            return
        loss, gn, tokens, *ms = vals
        n = max(acc.steps, 1)
        row = {"step": self.step, "time": round(self._now(), 3), "lr": acc.lr, "loss": loss / n}
        row.update({k: v for k, v in zip(keys, ms) if k not in row})
        row.update(grad_norm=gn / n, tokens_per_s=round(tokens / max(acc.seconds, 1e-9), 1), split="train",
                   total_steps=self.args.steps, eta_s=self._eta())
        runs.append_metrics(self.run_dir, row)
        self._emit({"event": "train", **row})
        self._status("running")
        self._say(f"step {self.step}/{self.args.steps}  loss {row['loss']:.4f}  lr {acc.lr:.2e}  "
                  f"grad norm {row['grad_norm']:.2f}  {row['tokens_per_s']:.0f} tok/s")

    def _eval(self) -> None:
        """Rank 0 only, on the unwrapped model, inside a saved-and-restored RNG state, so evaluating
        (with any random masking it does) never changes what training sees."""
        if self.rank != 0:
            return
        self._status("running")  # the step an evaluator reads (the probe sentences' table) is this one
        state = rng_state()
        self.model.eval()
        try:
            with torch.no_grad(), torch.autocast(self.device.type, torch.bfloat16, enabled=self.args.bf16):
                res = self.evaluate(self.model)
        finally:
            self.model.train()
            set_rng_state(state)
        row = {"step": self.step, "time": round(self._now(), 3), "split": "eval"}
        row.update({k: float(v) for k, v in (res or {}).items() if k not in row})
        runs.append_metrics(self.run_dir, row)
        self._emit({"event": "eval", **row})
        shown = {k: v for k, v in row.items() if k not in ("step", "time", "split") and "_L" not in k}
        self._say(f"eval at step {self.step}: " + "  ".join(f"{k} {v:.4g}" for k, v in shown.items()))

    def _save(self) -> Path | None:
        """All ranks hand in their RNG state; rank 0 writes (runs.write_checkpoint makes it atomic)."""
        self._saved_at = time.monotonic()
        rngs = [rng_state()]
        if self.world > 1:
            rngs = [None] * self.world
            dist.all_gather_object(rngs, rng_state())
        if self.rank != 0:
            return None
        state = {"step": self.step, "elapsed": round(self._now(), 3), "total_steps": self.args.steps,
                 "world_size": self.world}
        src = getattr(self, "source", self.batches)  # a prefetcher says where the trainer is, not where it is
        bs = src.state_dict() if hasattr(src, "state_dict") else None

        def write(tmp: Path) -> None:
            self.on_save(self.model, tmp)
            torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
            torch.save(self.scheduler.state_dict(), tmp / "scheduler.pt")
            torch.save(rngs, tmp / "rng.pt")
            try:
                json.dumps(bs)
                state["batches"] = bs
            except (TypeError, ValueError):  # e.g. tensors: a weights-only pickle instead
                torch.save(bs, tmp / "batches.pt")
                state["batches_file"] = "batches.pt"
        final = runs.write_checkpoint(self.run_dir, self.step, write, state, self.args.keep_last)
        self._say(f"saved {final}")
        return final


class _Interval:
    """Sums over the steps since the last metrics row, kept where the step ran (a GPU's values are read
    once a row, not once a step). Float64 sums add up exactly as Python floats did."""

    def __init__(self, device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        self.steps, self.lr, self.seconds, self.tokens = 0, 0.0, 0.0, 0
        self.loss = self.grad_norm = torch.zeros((), dtype=torch.float64, device=self.device)
        self.sums: dict[tuple[str, ...], tuple] = {}  # metric names -> (sums, counts) vectors
        self.finite, self._bad = None, None

    def add_metrics(self, metrics: dict | None) -> None:
        """A metric may be a float or a 0-d tensor; a non-finite one (undefined this step, e.g. an AUC with no
        positives) is left out of its mean. A step's tensors are summed as one vector: a few kernels, not a
        few per metric."""
        if not metrics:
            return
        keys = tuple(sorted(metrics))
        vals = [metrics[k] for k in keys]
        if all(torch.is_tensor(v) and v.device == self.device for v in vals):
            v = torch.stack([x.detach().reshape(()).float() for x in vals]).double()  # (K,)
        else:  # floats (or tensors elsewhere): read them here
            v = torch.tensor([float(x) for x in vals], dtype=torch.float64, device=self.device)
        ok = torch.isfinite(v)
        s, c = self.sums.get(keys, (0, 0))
        self.sums[keys] = (s + torch.where(ok, v, 0.0), c + ok.long())

    def metric_means(self) -> tuple[list[str], list[float]]:
        """(names, means) of the metrics with at least one finite value."""
        total: dict[str, list[float]] = {}
        for keys, (s, c) in self.sums.items():  # one read per set of names (usually one)
            for k, a, b in zip(keys, s.tolist(), c.tolist()):
                t = total.setdefault(k, [0.0, 0])
                t[0], t[1] = t[0] + a, t[1] + b
        names = sorted(k for k, (_, n) in total.items() if n)
        return names, [total[k][0] / total[k][1] for k in names]

    def note_finite(self, finite: torch.Tensor, loss: torch.Tensor, gn: torch.Tensor) -> None:
        """Remember whether every step so far was finite, and the first bad step's loss and norm."""
        if self.finite is None:
            self.finite, self._bad = finite, torch.stack([loss, gn])
        else:
            first = self.finite & ~finite  # this step is the first bad one
            self._bad = torch.where(first, torch.stack([loss, gn]), self._bad)
            self.finite = self.finite & finite

    def all_finite(self) -> bool:
        return self.finite is None or bool(self.finite)

    def last_bad(self) -> tuple[float, float]:
        loss, gn = self._bad.tolist()
        return loss, gn

    def add_step(self, loss, grad_norm, lr: float, seconds: float) -> None:
        self.steps, self.loss, self.grad_norm = self.steps + 1, self.loss + loss, self.grad_norm + grad_norm
        self.lr, self.seconds = lr, self.seconds + seconds
