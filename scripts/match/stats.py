"""Match statistics: Elo with a 95 % interval per game (trinomial) and per game pair
(pentanomial), and the likelihood of superiority.

All of it is the logistic Elo model with a normal approximation of the mean score:

    score s in (0, 1)         Elo(s) = -400 * log10(1/s - 1)

Trinomial (each game an independent sample, outcomes 1, 1/2, 0 with frequencies w, d, l):
    mu    = w + d/2
    var   = w (1 - mu)^2 + d (1/2 - mu)^2 + l (0 - mu)^2      (per game)
    se    = sqrt(var / N)                                       N = games
Pentanomial (each pair of games on one opening, colours reversed, an independent sample; the
pair's score per game is 0, 1/4, 1/2, 3/4 or 1 with frequencies p0 .. p4):
    mu    = sum_i p_i x_i
    var   = sum_i p_i (x_i - mu)^2                              (per pair)
    se    = sqrt(var / P)                                       P = pairs
Interval: the score interval mu -/+ z se, z = 1.959964 (two-sided 95 %), mapped through Elo();
a bound at or beyond 0 or 1 is -inf / +inf. The pentanomial interval accounts for the
correlation between the two games of a pair (same opening), which the trinomial one ignores:
it is the one to trust for paired openings (fishtest reports the same).

LOS, the probability that the first engine is the stronger (draws carry no information):
    LOS = 1/2 (1 + erf((W - L) / sqrt(2 (W + L))))
and, from the pentanomial model, Phi((mu - 1/2) / se).
"""

import math
from statistics import NormalDist

Z95 = NormalDist().inv_cdf(0.975)  # 1.959963984540054

PAIR_SCORES = (0.0, 0.25, 0.5, 0.75, 1.0)


def elo(score):
    """Logistic Elo difference for an expected score; +-inf at 1 and 0."""
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    # = -400 log10(1/s - 1), written so that s = 1/2 gives +0.0 rather than -0.0.
    return 400.0 * math.log10(score / (1.0 - score))


def _interval(samples, weights):
    """Mean, standard error of the mean and 95 % Elo interval of a discrete distribution given
    as sample values and their counts."""
    n = sum(weights)
    if n == 0:
        return None
    mu = sum(x * c for x, c in zip(samples, weights)) / n
    var = sum(c * (x - mu) ** 2 for x, c in zip(samples, weights)) / n
    se = math.sqrt(var / n)
    lo, hi = mu - Z95 * se, mu + Z95 * se
    e_lo, e, e_hi = elo(lo), elo(mu), elo(hi)
    return {
        "n": n,
        "score": mu,
        "variance": var,
        "stderr": se,
        "score_low": lo,
        "score_high": hi,
        "elo": e,
        "elo_low": e_lo,
        "elo_high": e_hi,
        # Half the width of the interval, as cutechess-cli prints "Elo +/- margin"; infinite
        # where a bound is (both bounds at +inf or at -inf included).
        "elo_margin": (e_hi - e_lo) / 2.0 if math.isfinite(e_hi - e_lo) else math.inf,
        "los": _los_normal(mu, se),
    }


def _los_normal(mu, se):
    if se == 0.0:
        return 1.0 if mu > 0.5 else 0.0 if mu < 0.5 else 0.5
    return NormalDist().cdf((mu - 0.5) / se)


def trinomial(wins, draws, losses):
    """Per-game model: {n, score, variance, stderr, score_low/high, elo, elo_low/high,
    elo_margin, los}, or None without games."""
    return _interval((1.0, 0.5, 0.0), (wins, draws, losses))


def pentanomial(pairs):
    """Per-pair model from the five pair counts [0, 1/2, 1, 3/2, 2 points of 2]; same keys as
    trinomial() (n counts pairs), or None without pairs."""
    return _interval(PAIR_SCORES, pairs)


def los(wins, losses):
    """Likelihood of superiority from wins and losses alone."""
    if wins + losses == 0:
        return 0.5
    return 0.5 * (1.0 + math.erf((wins - losses) / math.sqrt(2.0 * (wins + losses))))


def json_safe(value):
    """`value` with every infinite or NaN float replaced by None (JSON has neither)."""
    if isinstance(value, float):
        return None if math.isinf(value) or math.isnan(value) else value
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def fmt_elo(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "+inf" if x > 0 else "-inf"
    return f"{x:+.1f}"
