"""Fitting a scaling law to your own runs: L(x) = a·x^-α + c (x = non-embedding parameters N, tokens D
or FLOPs C), with confidence intervals and R², and the compute frontier of a sweep's run curves.

Kaplan et al. 2020 fit L(N) = (N_c / N)^α_N with no constant: their models were far from the loss the
text cannot go below. A small CPU sweep is not, so the fit here has an irreducible loss c, and the pure
power law (c = 0, Kaplan's form, a straight line on log-log axes) is fitted beside it. Arithmetic only:
numbers in, numbers out (scipy's curve_fit does the least squares).
"""
from __future__ import annotations

import math

import numpy as np

KAPLAN_ALPHA_N, KAPLAN_ALPHA_D = 0.076, 0.095  # Kaplan et al. 2020, eqs. 1.1 and 1.2
LEVEL = 0.95  # confidence level of the intervals


def _points(x, y, fewest: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"{what}: {x.size} x values but {y.size} losses")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))) or np.any(x <= 0) or np.any(y <= 0):
        raise ValueError(f"{what}: every x and every loss must be a positive number")
    if x.size < fewest or np.unique(x).size < fewest:
        raise ValueError(f"{what}: a fit of {fewest - 1} parameters needs at least {fewest} points at distinct x "
                         f"(to have any error left to estimate); got {np.unique(x).size}")
    return x, y


def _t(dof: int) -> float:
    from scipy.stats import t  # scipy is heavy: imported only when a fit is made
    return float(t.ppf(0.5 + LEVEL / 2, dof))


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - float(np.sum((y - pred) ** 2)) / ss_tot if ss_tot > 0 else 1.0


def _interval(value: float, se: float, t: float) -> list[float]:
    return [value - t * se, value + t * se] if math.isfinite(se) else [-math.inf, math.inf]


def power_law(x, y, what: str = "loss against x") -> dict:
    """Kaplan's form L = a·x^-α (c = 0): a straight line log L = log a - α log x, fitted by least squares
    on the logs. Needs 3 points. CIs from the line's covariance (t distribution, n - 2 degrees of freedom)."""
    x, y = _points(x, y, 3, what)
    lx, ly = np.log(x), np.log(y)
    (slope, icpt), cov = np.polyfit(lx, ly, 1, cov="unscaled")
    resid = ly - (slope * lx + icpt)
    dof = x.size - 2
    s2 = float(resid @ resid) / dof
    se_alpha, se_loga = math.sqrt(cov[0, 0] * s2), math.sqrt(cov[1, 1] * s2)
    t = _t(dof)
    alpha, a = -float(slope), math.exp(float(icpt))
    return {"form": "a * x^-alpha", "a": a, "alpha": alpha, "c": 0.0,
            "alpha_ci": _interval(alpha, se_alpha, t),
            "a_ci": [math.exp(float(icpt) - t * se_loga), math.exp(float(icpt) + t * se_loga)],
            "r2": _r2(y, a * x ** -alpha), "r2_log": _r2(ly, slope * lx + icpt), "n": int(x.size), "level": LEVEL}


def _start(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """A good start for (a, α, c) on x scaled to geometric mean 1: for a grid of c below the smallest
    loss, the straight line through log(L - c); the c whose line fits best."""
    best = None
    for c in np.linspace(0.0, 0.98 * y.min(), 50):
        lx, ly = np.log(x), np.log(y - c)
        slope, icpt = np.polyfit(lx, ly, 1)
        sse = float(np.sum((np.exp(icpt) * x ** slope + c - y) ** 2))
        if slope <= 0 and (best is None or sse < best[0]):
            best = (sse, math.exp(icpt), -slope, c)
    return best[1:] if best else (float(y.mean()), 0.1, 0.0)


def power_law_offset(x, y, what: str = "loss against x") -> dict:
    """L = a·x^-α + c by nonlinear least squares (scipy.optimize.curve_fit), bounded: a ≥ 0, 0 ≤ α ≤ 5,
    0 ≤ c ≤ the smallest loss. Needs 4 points (3 parameters and an error to estimate). CIs: the
    covariance's standard errors times the t quantile with n - 3 degrees of freedom (at 4 points that
    is 12.7: an honest, wide interval). x is scaled to geometric mean 1 inside, so a stays near the losses."""
    from scipy.optimize import curve_fit  # scipy is heavy: imported only when a fit is made
    x, y = _points(x, y, 4, what)
    x0 = float(np.exp(np.mean(np.log(x))))
    u = x / x0

    def f(u, a, alpha, c):
        return a * u ** -alpha + c
    p0 = np.clip(_start(u, y), [0, 0, 0], [np.inf, 5, y.min()])
    try:
        p, cov = curve_fit(f, u, y, p0=p0, bounds=([0, 0, 0], [np.inf, 5, float(y.min())]), maxfev=20_000)
    except RuntimeError as e:  # no convergence: say so in one sentence
        raise ValueError(f"{what}: the power law with an offset did not converge ({e})") from None
    a_u, alpha, c = map(float, p)
    se = [math.sqrt(v) if np.isfinite(v) and v >= 0 else math.inf for v in np.diag(cov)]
    t = _t(x.size - 3)
    # back to x: a·(x/x0)^-α = (a·x0^α)·x^-α; the interval of a in x's units follows its (scaled) interval
    scale = x0 ** alpha
    return {"form": "a * x^-alpha + c", "a": a_u * scale, "alpha": alpha, "c": c,
            "a_ci": [v * scale for v in _interval(a_u, se[0], t)], "alpha_ci": _interval(alpha, se[1], t),
            "c_ci": _interval(c, se[2], t), "r2": _r2(y, f(u, *p)),
            "r2_log": _r2(np.log(y), np.log(f(u, *p))), "n": int(x.size), "level": LEVEL, "x0": x0}


def predict(fit: dict, x) -> np.ndarray:
    return fit["a"] * np.asarray(x, dtype=float) ** -fit["alpha"] + fit["c"]


def fit_all(x, y, what: str = "loss against x") -> dict:
    """Both fits where there are points enough: {"power": ..., "offset": ...} (a fit that cannot be
    made is left out); ValueError when not even the pure power law can be."""
    res = {"power": power_law(x, y, what)}
    try:
        res["offset"] = power_law_offset(x, y, what)
    except ValueError:
        pass
    return res


def kaplan_line(x, y, alpha: float = KAPLAN_ALPHA_N) -> tuple[list[float], list[float]]:
    """A line of Kaplan's slope through the middle of the points (geometric means), across their x
    range: what the data would look like if they fell as fast as Kaplan's did."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    xm, ym = float(np.exp(np.log(x).mean())), float(np.exp(np.log(y).mean()))
    xs = np.logspace(np.log10(x.min()), np.log10(x.max()), 30)
    return xs.tolist(), (ym * (xs / xm) ** -alpha).tolist()


def frontier(curves: dict[str, list[tuple[float, float]]], points: int = 40) -> list[dict]:
    """The compute frontier of run curves {label: [(flops, loss), ...]}: for each of `points` FLOP budgets
    spaced evenly on a log axis, the run with the lowest held-out loss at that many FLOPs (its loss
    interpolated between evaluations, on log FLOPs; a run counts only within the FLOPs it reached)."""
    clean = {}
    for label, pts in curves.items():
        pts = sorted((float(c), float(v)) for c, v in pts if c > 0 and math.isfinite(v))
        if len(pts) >= 2:
            clean[label] = (np.log([c for c, _ in pts]), np.array([v for _, v in pts]))
    if not clean:
        return []
    lo = min(lc[0] for lc, _ in clean.values())
    hi = max(lc[-1] for lc, _ in clean.values())
    out = []
    for lc in np.linspace(lo, hi, points):
        best = None
        for label, (xs, ys) in clean.items():
            if xs[0] - 1e-9 <= lc <= xs[-1] + 1e-9:
                v = float(np.interp(lc, xs, ys))
                if best is None or v < best[1]:
                    best = (label, v)
        if best is not None:
            out.append({"flops": float(np.exp(lc)), "loss": best[1], "best": best[0]})
    return out
