"""Prediction-powered inference (PPI and PPI++) for a mean: an LLM judge's mean score corrected with the human
labels of a random sample of the same outputs (Angelopoulos et al. 2023, "Prediction-powered inference"; PPI++:
Angelopoulos, Duchi & Zrnic 2023, arXiv:2311.01453).

y are the human truths of the n labelled outputs, yhat the judge's scores on those same outputs, yhat_unlabeled the
judge's scores on the N other outputs. With a weight lam on the judge,

    estimate = mean(lam * yhat_unlabeled) + mean(y - lam * yhat)
    se^2     = var0(lam * yhat_unlabeled) / N + var0(y - lam * yhat) / n        (var0: divided by n, ddof 0)

and the 95% interval is estimate +- Z95 * se. lam = 1 is plain PPI, lam = 0 the labels alone. PPI++ tunes lam on
the data: cov0(y, yhat) / ((1 + n / N) * var1(yhat and yhat_unlabeled pooled)), clipped to [0, 1] (cov0 divided by n,
var1 with ddof 1). These are ppi_py 0.2.3's conventions (ppi_mean_ci, ppi_mean_pointestimate and _calc_lam_glm with
lam=None), to the last digit; ppi_py itself is not imported.

Two things one might expect of the tuned lambda do not hold exactly (tests/test_calibration.py shows both):
- a perfect judge (yhat == y) does not get lam = 1. Where its judge-only scores spread as the labelled ones it gets
  about N / (n + N), the weight that makes the estimate the mean of all n + N outputs; lam -> 1 as N / n grows.
- the PPI++ interval is not always at most as wide as the labels' alone: it is wider exactly when lam > 2 cov0 /
  (var0(yhat) + (n / N) var0(yhat_unlabeled)), which happens (rarely, at small n) when the judge spreads its scores
  on the labelled outputs far more than on the others, as the pooled variance in the tuning then understates them.

As in ppi_py there is no finite-population correction: where most of a stratum is labelled, the interval for the
mean of its outputs is conservative.

Strata (a stratified random sample, each stratum a simple random sample of its own outputs) are estimated apart and
combined with weights w_h = (n_h + N_h) / sum, se = sqrt(sum w_h^2 se_h^2). Outputs that share a cluster (the
statements of one question) are resampled together: a percentile bootstrap of clusters within each stratum, with
lambda tuned again in each resample. Non-finite inputs are refused (ValueError), never averaged in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike

from offline_eval.runtime.i18n import kept

Z95: float = 1.959963984540054  # scipy.stats.norm.ppf(0.975), as ppi_py's intervals (scipy is slow to import)
ANALYTIC = "analytic"
CLUSTER_BOOTSTRAP = "cluster bootstrap"
# A bootstrap whose resamples are undefined (fewer than 2 labels, or no judge-only output, in a stratum) more often
# than this gives no interval: the percentile of the others would be conditioned on the lucky draws.
MAX_UNDEFINED = 0.01
_CELLS = 4_000_000  # resamples x clusters drawn at once: memory stays bounded


@dataclass(frozen=True)
class Estimate:
    estimate: float | None
    ci_low: float | None = None  # None: no interval (see Calibrated.reason)
    ci_high: float | None = None
    se: float | None = None

    @classmethod
    def normal(cls, estimate: float, se: float) -> Estimate:
        return cls(estimate, estimate - Z95 * se, estimate + Z95 * se, se)


def _array(x: ArrayLike, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{what}: one number per output, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: {int(np.sum(~np.isfinite(a)))} non-finite values (NaN or inf)")
    return a


def _inputs(y: ArrayLike, yhat: ArrayLike, yhat_unlabeled: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b, u = _array(y, "y"), _array(yhat, "yhat"), _array(yhat_unlabeled, "yhat_unlabeled")
    if len(a) != len(b):
        raise ValueError(f"y has {len(a)} values and yhat {len(b)}: one judge score per labelled output")
    return a, b, u


def labels_only(y: ArrayLike) -> Estimate:
    """The labels' mean, se = std(ddof=0) / sqrt(n), a normal 95% interval; no interval below 2 labels."""
    a = _array(y, "y")
    if len(a) == 0:
        return Estimate(None)
    if len(a) == 1:
        return Estimate(float(a[0]))
    return Estimate.normal(float(a.mean()), float(a.std() / math.sqrt(len(a))))


def _lam(y: np.ndarray, yhat: np.ndarray, u: np.ndarray) -> np.ndarray:
    """tuned_lambda along the last axis (many data sets at once, for simulations): n >= 1 and N >= 1."""
    n, big_n = y.shape[-1], u.shape[-1]
    pooled = np.concatenate([yhat, u], axis=-1)
    cov = np.mean((y - y.mean(-1, keepdims=True)) * (yhat - yhat.mean(-1, keepdims=True)), axis=-1)
    constant = np.ptp(pooled, axis=-1) == 0  # exactly: the variance of a constant may be rounding noise
    var = np.where(constant, 1.0, np.var(pooled, axis=-1, ddof=1))
    return np.where(constant, 0.0, np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


def _ppi(y: np.ndarray, yhat: np.ndarray, u: np.ndarray, lam: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """ppi_mean's (estimate, se) along the last axis, lam one per data set: n >= 2 and N >= 1."""
    lam = np.expand_dims(np.asarray(lam, dtype=float), -1)
    rectifier = y - lam * yhat
    estimate = np.mean(lam * u, axis=-1) + rectifier.mean(-1)
    return estimate, np.sqrt(np.var(lam * u, axis=-1) / u.shape[-1] + np.var(rectifier, axis=-1) / y.shape[-1])


def tuned_lambda(y: ArrayLike, yhat: ArrayLike, yhat_unlabeled: ArrayLike) -> float:
    """PPI++'s weight on the judge, clipped to [0, 1]. 0 where it cannot be tuned: no labels, no judge-only output
    (the limit of the formula as N -> 0), or a constant judge."""
    a, b, u = _inputs(y, yhat, yhat_unlabeled)
    return 0.0 if len(a) == 0 or len(u) == 0 else float(_lam(a, b, u))


def ppi_mean(y: ArrayLike, yhat: ArrayLike, yhat_unlabeled: ArrayLike, lam: float) -> Estimate:
    """The PPI estimate with weight lam on the judge. No labels: None. No judge-only output: every output is
    labelled, and the estimate is the labels' mean (no interval). One label: the point estimate, no interval."""
    a, b, u = _inputs(y, yhat, yhat_unlabeled)
    if not math.isfinite(lam):
        raise ValueError(f"lam must be finite, got {lam}")
    if len(a) == 0:
        return Estimate(None)
    if len(u) == 0:
        return Estimate(float(a.mean()))
    estimate, se = _ppi(a, b, u, lam)
    return Estimate(float(estimate)) if len(a) < 2 else Estimate.normal(float(estimate), float(se))


def ppi_plus_plus(y: ArrayLike, yhat: ArrayLike, yhat_unlabeled: ArrayLike) -> tuple[Estimate, float]:
    """PPI with the tuned lambda: (the estimate, lambda-hat)."""
    lam = tuned_lambda(y, yhat, yhat_unlabeled)
    return ppi_mean(y, yhat, yhat_unlabeled, lam), lam


def effective_n(n: int, N: int, rho: float) -> float:
    """The labels alone that would give PPI++'s precision with n labels, N judge-only outputs and a judge whose
    scores correlate rho with the human truth: n(n+N) / (n + (1-rho^2)N); n with rho = 0, n + N with |rho| = 1."""
    if n < 0 or N < 0 or not -1 <= rho <= 1:
        raise ValueError(f"need n, N >= 0 and -1 <= rho <= 1, got n={n}, N={N}, rho={rho}")
    if n == 0:
        return 0.0
    return n * (n + N) / (n + (1 - rho * rho) * N)


def _reaches(width: float, sd: float, n_eff: float) -> bool:
    return Z95 * sd / math.sqrt(n_eff) <= width


def _check_width(width: float, sd: float) -> None:
    if not (math.isfinite(width) and width > 0 and math.isfinite(sd) and sd >= 0):
        raise ValueError(f"need a half-width > 0 and an sd >= 0, got width={width}, sd={sd}")


def labels_for_width(width: float, sd: float, rho: float, total: int) -> int | None:
    """The fewest labels n (1..total) for a 95% half-width of `width` with the judge on the other total - n
    outputs: Z95 * sd / sqrt(effective_n(n, total - n, rho)) <= width. None: not even with every output labelled."""
    _check_width(width, sd)
    if total < 1:
        raise ValueError(f"total must be >= 1, got {total}")
    if not _reaches(width, sd, effective_n(total, 0, rho)):
        return None
    lo, hi = 1, total  # effective n grows with n (total fixed): the smallest n that reaches is found by bisection
    while lo < hi:
        mid = (lo + hi) // 2
        if _reaches(width, sd, effective_n(mid, total - mid, rho)):
            hi = mid
        else:
            lo = mid + 1
    return lo


def labels_alone_for_width(width: float, sd: float) -> int:
    """The labels alone for a 95% half-width of `width`: ceil((Z95 * sd / width)^2), at least 1."""
    _check_width(width, sd)
    n = max(1, math.ceil((Z95 * sd / width) ** 2))
    while n > 1 and _reaches(width, sd, n - 1):  # rounding in the square may put ceil one off the direct check
        n -= 1
    while not _reaches(width, sd, n):
        n += 1
    return n


@dataclass(frozen=True)
class BinaryAgreement:
    kappa: float | None  # Cohen's; None where undefined (both raters give one and the same level throughout)
    base_rate: float | None  # share of human 1s
    judge_rate: float | None  # share of judge 1s
    tpr: float | None  # P(judge 1 | human 1); None without a human 1
    tnr: float | None  # P(judge 0 | human 0); None without a human 0
    n: int


def binary_agreement(human: ArrayLike, judge: ArrayLike) -> BinaryAgreement:
    """Agreement on a 2-level criterion, its scores on [0, 1]: a value above the midpoint 0.5 is the upper level (1).
    A human mean of exactly 0.5 (annotators split evenly) is no majority for the upper level, and counts as 0."""
    h, j = _array(human, "human"), _array(judge, "judge")
    if len(h) != len(j):
        raise ValueError(f"human has {len(h)} values and judge {len(j)}")
    if np.any((h < 0) | (h > 1)) or np.any((j < 0) | (j > 1)):
        raise ValueError("binary_agreement takes scores on [0, 1]")
    n = len(h)
    if n == 0:
        return BinaryAgreement(None, None, None, None, None, 0)
    hp, jp = h > 0.5, j > 0.5
    base, rate = float(hp.mean()), float(jp.mean())
    agree = float(np.mean(hp == jp))
    chance = base * rate + (1 - base) * (1 - rate)
    kappa = None if chance == 1 else (agree - chance) / (1 - chance)
    tpr = float(jp[hp].mean()) if hp.any() else None
    tnr = float((~jp[~hp]).mean()) if (~hp).any() else None
    return BinaryAgreement(kappa, base, rate, tpr, tnr, n)


@dataclass(frozen=True)
class Stratum:
    y: Sequence[float]  # human truth of the labelled outputs (mean over annotators)
    yhat: Sequence[float]  # the judge's score on those same outputs
    yhat_unlabeled: Sequence[float]  # the judge on the stratum's other outputs
    clusters: Sequence[str] | None = None  # cluster id of each labelled output (None: each its own)
    clusters_unlabeled: Sequence[str] | None = None
    name: str = ""


@dataclass(frozen=True)
class Calibrated:
    ppi_pp: Estimate  # the headline: PPI++ (tuned lambda)
    ppi: Estimate  # plain PPI, lambda = 1
    labels: Estimate  # labels only
    judge_mean: float | None  # the judge's mean over all outputs (labelled and not), strata weighted by size
    lam: float | None  # lambda-hat (the single stratum's; with several strata, None and see lams)
    lams: list[float] = field(default_factory=list)  # per stratum (0 where it cannot be tuned)
    n: int = 0  # labelled outputs
    N: int = 0  # judge-only (unlabelled) outputs
    rho: float | None = None  # Pearson's r of y and yhat over all labelled outputs, strata pooled
    effective_n: float | None = None  # effective_n(n, N, rho) of the pooled n, N and rho
    method: str = ANALYTIC  # "analytic" or "cluster bootstrap"
    reason: str | None = None  # one line: why there is no interval (or no estimate)


@dataclass(frozen=True)
class _Part:
    """One stratum, checked: its arrays and each output's cluster (labelled first, then judge-only)."""

    y: np.ndarray
    yhat: np.ndarray
    u: np.ndarray
    cluster: np.ndarray  # (n + N,) cluster index
    n_clusters: int
    stratum: str  # its name where the labels are stratified, else ""

    @property
    def size(self) -> int:
        return len(self.y) + len(self.u)

    def sums(self) -> np.ndarray:
        """(clusters, 9): count, sum y, sum yhat, sum y^2, sum yhat^2, sum y*yhat of the labelled outputs; count,
        sum and sum of squares of the judge-only ones; the clusters put in one order by their sums, so the
        bootstrap depends on what the clusters hold, never on the order the outputs came in."""
        n = len(self.y)
        lab = np.column_stack([np.ones(n), self.y, self.yhat, self.y**2, self.yhat**2, self.y * self.yhat])
        unl = np.column_stack([np.ones(len(self.u)), self.u, self.u**2])
        rows = np.zeros((self.size, 9))
        rows[:n, :6], rows[n:, 6:] = lab, unl
        out = np.zeros((self.n_clusters, 9))
        np.add.at(out, self.cluster, rows)
        return out[np.lexsort(np.round(out, 9).T[::-1])]


def _part(s: Stratum, index: int, several: bool) -> _Part:
    y, yhat, u = _inputs(s.y, s.yhat, s.yhat_unlabeled)
    name = s.name or f"#{index + 1}"
    stratum = name if several or s.name else ""
    where = f" in stratum '{stratum}'" if stratum else ""
    labels: list[object] = []
    for given, count, what in ((s.clusters, len(y), "clusters"), (s.clusters_unlabeled, len(u), "clusters_unlabeled")):
        if given is None:
            labels += [(what, i) for i in range(count)]
        elif len(given) != count:
            raise ValueError(f"{what}{where}: {len(given)} ids for {count} outputs")
        else:
            labels += list(given)
    ids: dict[object, int] = {}
    cluster = np.array([ids.setdefault(c, len(ids)) for c in labels], dtype=np.int64)
    return _Part(y, yhat, u, cluster, len(ids), stratum)


def _pearson(y: np.ndarray, yhat: np.ndarray) -> float | None:
    if len(y) < 2 or np.ptp(y) == 0 or np.ptp(yhat) == 0:
        return None
    dy, dh = y - y.mean(), yhat - yhat.mean()
    return float(np.clip(np.sum(dy * dh) / math.sqrt(float(np.sum(dy * dy)) * float(np.sum(dh * dh))), -1.0, 1.0))


# Why a judged number is not calibrated (Calibrated.reason), stored in English (i18n.said shows it).
NO_LABELS = kept("no labels: its human mean is unknown")
ONE_LABEL = kept("1 label: an interval needs 2 or more")
NO_JUDGE_ONLY = kept("no judge-only outputs: every output is labelled")
NO_LABELS_IN = kept("no labels in stratum '{stratum}': its human mean is unknown")
ONE_LABEL_IN = kept("1 label in stratum '{stratum}': an interval needs 2 or more")
NO_JUDGE_ONLY_IN = kept("no judge-only outputs in stratum '{stratum}': every output is labelled")
NO_OUTPUTS = kept("no outputs")
NO_HUMAN_LABELS = kept("no human labels")


def _why(parts: list[_Part]) -> str | None:
    why = []
    for p in parts:
        if len(p.y) == 0:
            why.append(NO_LABELS_IN.format(stratum=p.stratum) if p.stratum else NO_LABELS)
        elif len(p.y) == 1:
            why.append(ONE_LABEL_IN.format(stratum=p.stratum) if p.stratum else ONE_LABEL)
        if len(p.u) == 0:
            why.append(NO_JUDGE_ONLY_IN.format(stratum=p.stratum) if p.stratum else NO_JUDGE_ONLY)
    return "; ".join(why) or None


def _of_sums(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(resamples, 9) summed columns of _Part.sums -> the labels' mean, PPI and PPI++ of each resample, by the same
    formulas as labels_only, ppi_mean and tuned_lambda; NaN where fewer than 2 labels or no judge-only output."""
    n, sy, sh, _, shh, syh, big_n, su, suu = s.T
    ok = (n >= 2) & (big_n >= 1)
    n, big_n = np.where(ok, n, 2), np.where(ok, big_n, 1)
    my, mh, mu = sy / n, sh / n, su / big_n
    cov = syh / n - my * mh
    total = n + big_n
    ss = shh + suu
    var_pooled = (ss - (sh + su) ** 2 / total) / (total - 1)
    # a constant judge's pooled variance is rounding noise from the sums, not spread
    constant = var_pooled <= 1e-12 * np.maximum(ss / total, 1e-300)
    safe = np.where(constant, 1.0, var_pooled)
    lam = np.where(constant, 0.0, np.clip(cov / ((1 + n / big_n) * safe), 0.0, 1.0))
    nan = np.full(len(s), np.nan)
    return np.where(ok, my, nan), np.where(ok, mu + my - mh, nan), np.where(ok, lam * mu + my - lam * mh, nan)


def _draws(rng: np.random.Generator, b: int, c: int) -> np.ndarray:
    """(b, c) counts: how often each of c clusters is drawn in each of b resamples of c draws with replacement."""
    flat = (rng.integers(0, c, size=(b, c)) + (np.arange(b) * c)[:, None]).ravel()
    return np.bincount(flat, minlength=b * c).reshape(b, c).astype(float)


def _bootstrap(
    parts: list[_Part], w: np.ndarray, n_resamples: int, seed: int
) -> tuple[list[tuple[float, float, float]] | None, str | None]:
    """Percentile intervals (low, high, se: the resamples' std) of the labels' mean, PPI and PPI++, from resampling
    each stratum's clusters with replacement, the strata weighted by their full sizes; or why there are none."""
    rng = np.random.default_rng(seed)
    sums = [p.sums() for p in parts]
    chunk = max(1, _CELLS // max(len(s) for s in sums))
    drawn: list[np.ndarray] = []
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        total = np.zeros((b, 3))
        for wh, s in zip(w, sums):
            total += wh * np.column_stack(_of_sums(_draws(rng, b, len(s)) @ s))
        drawn.append(total)
    boots = np.concatenate(drawn)
    ok = ~np.isnan(boots).any(axis=1)
    bad = int(n_resamples - ok.sum())
    if bad > MAX_UNDEFINED * n_resamples or ok.sum() < 2:
        return None, (
            f"{bad} of {n_resamples} cluster resamples had fewer than 2 labels or no judge-only output in a stratum: "
            "too few clusters for a bootstrap interval"
        )
    lo, hi = np.percentile(boots[ok], [2.5, 97.5], axis=0)
    se = boots[ok].std(axis=0, ddof=1)
    return [(float(lo[k]), float(hi[k]), float(se[k])) for k in range(3)], None


def _combine(w: np.ndarray, estimates: list[Estimate], interval: bool) -> Estimate:
    """The strata's estimates weighted by w; the normal interval of se = sqrt(sum w_h^2 se_h^2) if asked."""
    xs, ses = [e.estimate for e in estimates], [e.se for e in estimates]
    if any(x is None for x in xs):
        return Estimate(None)
    point = float(np.dot(w, np.array(xs, dtype=float)))
    if not interval or any(se is None for se in ses):
        return Estimate(point)
    return Estimate.normal(point, math.sqrt(float(np.dot(w * w, np.array(ses, dtype=float) ** 2))))


def calibrate(strata: Sequence[Stratum], n_resamples: int = 2000, seed: int = 0) -> Calibrated:
    """PPI++, plain PPI and the labels alone over a stratified random sample of labels, strata weighted by their
    sizes (a stratum with no outputs weighs nothing and is left out, of lams too). Intervals are analytic where
    every cluster holds one output, else from a cluster bootstrap (n_resamples, seed) whose point estimates are
    still the analytic ones. Pooled over strata: n, N, rho and effective_n."""
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    parts = [p for i, s in enumerate(strata) if (p := _part(s, i, len(strata) > 1)).size > 0]
    none = Estimate(None)
    if not parts:
        return Calibrated(none, none, none, None, None, reason=NO_OUTPUTS)
    sizes = np.array([p.size for p in parts], dtype=float)
    w = sizes / sizes.sum()
    lams = [tuned_lambda(p.y, p.yhat, p.u) for p in parts]
    n, big_n = sum(len(p.y) for p in parts), sum(len(p.u) for p in parts)
    rho = _pearson(np.concatenate([p.y for p in parts]), np.concatenate([p.yhat for p in parts]))
    clustered = any(p.n_clusters < p.size for p in parts)
    reason = _why(parts)
    base = Calibrated(
        none,
        none,
        none,
        judge_mean=float(np.dot(w, [np.concatenate([p.yhat, p.u]).mean() for p in parts])),
        lam=lams[0] if len(parts) == 1 and n > 0 else None,
        lams=lams,
        n=n,
        N=big_n,
        rho=rho,
        effective_n=None if rho is None else effective_n(n, big_n, max(rho, 0.0)),  # lambda is clipped at 0
        method=CLUSTER_BOOTSTRAP if clustered else ANALYTIC,
        reason=NO_HUMAN_LABELS if n == 0 else reason,
    )
    if n == 0 or any(len(p.y) == 0 for p in parts):
        return base
    per = [
        (labels_only(p.y), ppi_mean(p.y, p.yhat, p.u, 1.0), ppi_mean(p.y, p.yhat, p.u, lam))
        for p, lam in zip(parts, lams)
    ]
    out = [_combine(w, [e[k] for e in per], reason is None and not clustered) for k in range(3)]
    if reason is None and clustered:
        got, reason = _bootstrap(parts, w, n_resamples, seed)
        if got is not None:
            out = [replace(e, ci_low=got[k][0], ci_high=got[k][1], se=got[k][2]) for k, e in enumerate(out)]
    return replace(base, labels=out[0], ppi=out[1], ppi_pp=out[2], reason=reason)
