"""What every job spec shares: `opt` fields (default, help, range check, choices), validation, JSON
and command-line flags (`Spec`), and the Trainer's own settings (`TrainArgs`). The job kinds
themselves are in specs.py."""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, NamedTuple


class Check(NamedTuple):
    """What values a field accepts: the test, what it means ("steps must be a positive integer, got 0"),
    and the bounds a web form's number box takes (None: open; a bound the test excludes is the box's too)."""
    test: Callable[[Any], bool]
    text: str
    lo: float | None = None
    hi: float | None = None


POSITIVE = Check(lambda v: v >= 1, "a positive integer", 1)
POSITIVE_NUM = Check(lambda v: v > 0, "a positive number", 0)
NON_NEGATIVE = Check(lambda v: v >= 0, "at least 0", 0)
DROPOUT = Check(lambda v: 0 <= v < 1, "in [0, 1)", 0, 1)
SHARE = Check(lambda v: 0 < v < 1, "between 0 and 1", 0, 1)
MAX_STEPS, MAX_TOKENS = 10_000_000, 8192  # beyond any CPU run: a typo, not a plan


def between(lo: float, hi: float, text: str = "") -> Check:
    return Check(lambda v: lo <= v <= hi, text or f"from {lo:,} to {hi:,}", lo, hi)


def opt(default: Any, help: str, check: Check | tuple | None = None, choices: tuple | None = None,
        aliases: tuple[str, ...] = (), label: str = "", spellings: dict | None = None) -> Any:
    """A spec field: its default, the help text its flag and form show, what values it accepts, and the
    short label a web form gives it (default: its name in words). `spellings`: other names a flag or a
    spec.json may give a choice (family.ARCHS: short name -> model_type); the spec keeps the choice, a form
    lists only it."""
    if check is not None and not isinstance(check, Check):
        check = Check(*check)
    return field(default=default, metadata={"help": help, "check": check, "choices": choices, "aliases": aliases,
                                            "label": label, "spellings": spellings or {}})


def label_of(f: dataclasses.Field) -> str:
    return f.metadata.get("label") or f.name.replace("_", " ").capitalize()


def field_kind(f: dataclasses.Field) -> tuple[str, bool]:
    """('int' | 'float' | 'str' | 'bool' | 'tuple[str, ...]' | 'tuple[float, float]', may it be None)."""
    t = f.type.__name__ if isinstance(f.type, type) else str(f.type)
    return t.replace(" | None", "").strip(), "None" in t


def _coerce(name: str, kind: str, v):
    """The value as the field's type; web forms send 2.0 for 2, JSON sends lists for tuples."""
    if kind == "bool" and isinstance(v, bool):
        return v
    if kind == "int" and not isinstance(v, bool) and (isinstance(v, int) or isinstance(v, float) and v.is_integer()):
        return int(v)
    if kind == "float" and not isinstance(v, bool) and isinstance(v, (int, float)):
        return float(v)
    if kind == "str" and isinstance(v, str):
        return v
    if kind.startswith("tuple") and isinstance(v, (list, tuple)):
        item = "float" if "float" in kind else "str"
        return tuple(_coerce(name, item, x) for x in v)
    what = {"int": "a whole number", "float": "a number", "str": "text", "bool": "true or false"}.get(kind, kind)
    raise ValueError(f"{name} must be {what}, got {v!r}")


@dataclass
class Spec:
    """Validation, JSON, and command-line flags for every job spec."""
    KIND: ClassVar[str] = ""
    # Fields a resumed run may change; every other one stays as the run began.
    RESUMABLE: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self):
        for f in fields(self):
            v, (kind, optional) = getattr(self, f.name), field_kind(f)
            if v is None and optional:
                continue
            v = _coerce(f.name, kind, v)
            v = f.metadata.get("spellings", {}).get(v, v) if isinstance(v, str) else v
            check, choices = f.metadata.get("check"), f.metadata.get("choices")
            if choices and v not in choices:
                raise ValueError(f"{f.name} must be one of {', '.join(map(str, choices))}, got {v!r}")
            if check and not check.test(v):
                raise ValueError(f"{f.name} must be {check.text}, got {v!r}")
            setattr(self, f.name, v)
        self.check()

    def check(self) -> None:
        """Rules between fields; a subclass raises ValueError naming the field."""

    def to_dict(self) -> dict:  # the Trainer's own train_args.json has no kind
        kind = {"kind": self.KIND} if self.KIND else {}
        return {**kind, **{f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}}

    @classmethod
    def from_dict(cls, d: dict):
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def resumed(self, changes: dict) -> tuple["Spec", list[str]]:
        """This (saved) spec with the changes a resume may make; the names of those it may not."""
        ignored = [k for k, v in changes.items() if k not in self.RESUMABLE and getattr(self, k, v) != v]
        return self.replace(**{k: v for k, v in changes.items() if k in self.RESUMABLE}), ignored

    # ---- the command line ----
    @classmethod
    def add_arguments(cls, p: argparse.ArgumentParser) -> None:
        """One flag per field. Flags not given stay absent, so the dataclass defaults are the only defaults."""
        for f in fields(cls):
            kind, optional = field_kind(f)
            m = f.metadata
            names = ["--" + f.name.replace("_", "-"), *m.get("aliases", ())]
            shown = m.get("help", "") + ("" if f.default is None else f" (default: {f.default})")
            kw: dict = {"default": argparse.SUPPRESS, "help": shown.replace("%", "%%"), "dest": f.name}
            if kind == "bool":
                p.add_argument(*names, action=argparse.BooleanOptionalAction, **kw)
                continue
            item = {"int": int, "float": float}.get(kind.removeprefix("tuple[").split(",")[0].rstrip("]"), str)
            if kind.startswith("tuple"):
                kw["nargs"] = 2 if "float, float" in kind else "+"
            if m.get("spellings"):  # argparse converts before it checks the choices
                item = lambda v, known=m["spellings"]: known.get(v, v)  # noqa: E731
            choices = m.get("choices") and (*m["choices"], *m.get("spellings", ()))  # listed in --help too
            p.add_argument(*names, type=item, choices=choices, **kw)

    @classmethod
    def given(cls, ns: argparse.Namespace) -> dict:
        """The fields given on the command line."""
        return {f.name: getattr(ns, f.name) for f in fields(cls) if hasattr(ns, f.name)}


@dataclass
class TrainArgs(Spec):
    """What the model-agnostic Trainer needs: optimisation, schedule, checkpoints, precision."""
    steps: int = opt(1000, "optimizer steps (each of --accum micro-batches)", between(1, MAX_STEPS), label='Steps')
    lr: float = opt(5e-4, "peak learning rate (AdamW)", POSITIVE_NUM, label='Learning rate')
    warmup: float = opt(0.05, "warm-up: a fraction of the steps if below 1, else a number of steps", NON_NEGATIVE, label='Warm-up')
    weight_decay: float = opt(0.01, "AdamW weight decay, on matrices only", NON_NEGATIVE, label='Weight decay')
    betas: tuple[float, float] = opt((0.9, 0.98), "AdamW betas",
                                     (lambda v: len(v) == 2 and all(0 <= b < 1 for b in v), "two numbers in [0, 1)"))
    eps: float = opt(1e-6, "AdamW epsilon", POSITIVE_NUM, label='AdamW epsilon')
    clip: float = opt(1.0, "largest global gradient norm; 0 = no clipping", NON_NEGATIVE, label='Gradient clipping (largest norm)')
    accum: int = opt(1, "micro-batches per optimizer step", POSITIVE, label='Micro-batches per step')
    bf16: bool = opt(False, "bfloat16 autocast where the hardware computes it natively (else fp32)", label='bfloat16 where the hardware computes it natively (~1.5x faster on such a CPU); fp32 elsewhere')
    seed: int = opt(0, "random seed (weights, data order, masks, dropout)", label='Seed')
    log_every: int = opt(10, "steps between training rows in metrics.jsonl", POSITIVE)
    eval_every: int = opt(200, "steps between evaluations", POSITIVE)
    eval_early: int = opt(0, "also evaluate at steps 10, 25, 50, 100, 250, ... up to this step, before the first "
                             "regular evaluation: something to see early (0 = off)", NON_NEGATIVE, label='Early evaluations up to step')
    save_every: int = opt(500, "steps between checkpoints", POSITIVE)
    save_every_s: float = opt(60.0, "also save once this many seconds passed since the last checkpoint, so a "
                                    "killed run loses at most that much (0 = by steps only)", NON_NEGATIVE)
    keep_last: int = opt(2, "checkpoints kept", POSITIVE)
    device: str = opt("auto", "cpu | cuda | cuda:N | auto (a GPU where PyTorch sees one, else the CPU)")
    compile: bool = opt(False, "torch.compile the model for training (a GPU's speed-up; compiling takes a minute "
                               "first)")
    stop_at: int | None = opt(None, "stop after this step, resumably, keeping the --steps schedule "
                                    "(compare the start of long runs)", POSITIVE)
    RESUMABLE: ClassVar[tuple[str, ...]] = ("steps", "stop_at", "bf16", "log_every", "eval_every", "eval_early",
                                            "save_every", "save_every_s", "keep_last", "device", "compile")

    @property
    def warmup_steps(self) -> int:
        return min(self.steps, int(round(self.warmup * self.steps)) if self.warmup < 1 else int(self.warmup))

    def train_args(self) -> "TrainArgs":
        """Only the Trainer's fields (what train_args.json holds)."""
        return TrainArgs(**{f.name: getattr(self, f.name) for f in fields(TrainArgs)})
