//! The `score` (and `wdl`) of an `info` line, as lc0's `ScoreType` option chooses it.
//!
//! Every formula takes W − L (`wl`) and D (`d`) of a line for the side to move at the root,
//! and the result is truncated toward zero to an integer, as lc0 truncates it:
//!
//! | `ScoreType`                | score                                              |
//! |----------------------------|----------------------------------------------------|
//! | `centipawn`                | `cp` 90·tan(1.5637541897·(W − L))                  |
//! | `centipawn_with_drawscore` | `cp` 90·tan(1.5637541897·Q)                        |
//! | `centipawn_2019`           | `cp` 295·(W − L) / (1 − 0.976953126·(W − L)¹⁴)     |
//! | `centipawn_2018`           | `cp` 290.680623072·tan(1.548090806·(W − L))        |
//! | `win_percentage`           | `cp` 5000·(W − L) + 5000 (W + D/2 in 1/100 %)      |
//! | `Q`                        | `cp` 10000·Q                                       |
//! | `W-L`                      | `cp` 10000·(W − L)                                 |
//! | `WDL_mu` (the default)     | `cp` 100·μ of the WDL model below, else 45·tan(1.56728071628·(W − L)) |
//!
//! Q is W − L + DrawScore·D in lc0; lc0rs has no DrawScore (lc0's default is 0), so Q is W − L
//! here and `centipawn_with_drawscore` and `Q` print what `centipawn` and `W-L` print.
//!
//! `WDL_mu`: lc0 models a position's W, D, L as a logistic distribution of the game's
//! outcome around μ with scale s, W = σ((μ − 1)/s), L = σ((−μ − 1)/s) (σ the logistic
//! function). Inverting it, with a = ln(1/L − 1) and b = ln(1/W − 1): s = 2/(a + b) and
//! μ = (a − b)/(a + b). μ is a pawn-like advantage (+1: what a pawn up is worth), so the score
//! is 100·μ. lc0 then recomputes W and L from μ and s (W′ = σ((μ − 1)/s),
//! L′ = σ((−μ − 1)/s), D′ = max(0, 1 − W′ − L′)), and the `wdl` shown and the fallback below
//! use W′ − L′ and D′. It skips all of this (μ = 0, W, D, L unchanged) unless each of W, D
//! and L lies strictly between 0.0001 and 0.9999. The score is 100·μ where the network has a
//! WDL head, μ ≠ 0, |W′ − L′| + D′ < 0.996, and either |μ| < 1 or 100·|μ| is above the
//! fallback's magnitude; otherwise it is the fallback 45·tan(1.56728071628·(W′ − L′)).
//!
//! lc0 applies its contempt settings in the same step (μ moved by ±s²·WDLRescaleDiff, s scaled
//! by WDLRescaleRatio, s capped at WDLMaxS); with its default settings (Contempt and
//! UCI_RatingAdv 0, WDLDrawRateTarget 0, WDLCalibrationElo 0) the ratio is 1 and the shift 0,
//! so none of them changes anything. lc0rs has no contempt and computes that default.
//!
//! lc0 computes the logarithms and logistic functions of `WDL_mu` with its FastLog and
//! FastLogistic approximations (a quadratic in the mantissa for log₂ and for 2ˣ), in 32-bit
//! floats. Against exact logarithms they change the printed score by a few centipawns (up to
//! 9 over a grid of W/D/L with scores within ±300, more at extreme W/D/L) and the `wdl` shown
//! by up to 4 per mille (W = L = 0.25, D = 0.5 shows as `wdl 249 502 249`), so they are
//! reproduced here, in the same float32 steps, to print what lc0 prints.
//!
//! A proven result is `mate N` under every score type (negative: mated).

use std::fmt;

use crate::search::{PvLine, wdl_per_mille};

/// lc0's `ScoreType` choices, in lc0's order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ScoreType {
    Centipawn,
    CentipawnWithDrawscore,
    Centipawn2019,
    Centipawn2018,
    WinPercentage,
    Q,
    WMinusL,
    #[default]
    WdlMu,
}

impl ScoreType {
    pub const ALL: [ScoreType; 8] = [
        Self::Centipawn,
        Self::CentipawnWithDrawscore,
        Self::Centipawn2019,
        Self::Centipawn2018,
        Self::WinPercentage,
        Self::Q,
        Self::WMinusL,
        Self::WdlMu,
    ];

    /// The option value naming it, as lc0 spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Centipawn => "centipawn",
            Self::CentipawnWithDrawscore => "centipawn_with_drawscore",
            Self::Centipawn2019 => "centipawn_2019",
            Self::Centipawn2018 => "centipawn_2018",
            Self::WinPercentage => "win_percentage",
            Self::Q => "Q",
            Self::WMinusL => "W-L",
            Self::WdlMu => "WDL_mu",
        }
    }

    /// The choice `name` names (exactly, as lc0 compares them).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// A UCI `score`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Score {
    Cp(i32),
    /// Mate in this many moves (negative: mated).
    Mate(i32),
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cp(cp) => write!(f, "cp {cp}"),
            Self::Mate(moves) => write!(f, "mate {moves}"),
        }
    }
}

/// What an `info` line shows of a line's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shown {
    pub score: Score,
    /// W, D, L per mille (UCI `wdl`): under `WDL_mu` from W′, D′, L′ of the model, otherwise
    /// from the line's own.
    pub wdl: [i32; 3],
}

/// The score and W/D/L of `line` under `score_type`; `has_wdl`: the network has a WDL head
/// (without one, `WDL_mu` always takes its fallback).
pub fn line_score(line: &PvLine, score_type: ScoreType, has_wdl: bool) -> Shown {
    shown(line.q, line.wdl[1], line.mate, score_type, has_wdl)
}

/// The score and W/D/L from W − L `wl` and D `d` for the side to move, and `mate` where the
/// result is proven.
pub fn shown(
    mut wl: f32,
    mut d: f32,
    mate: Option<i32>,
    score_type: ScoreType,
    has_wdl: bool,
) -> Shown {
    let mut mu = 0.0;
    if score_type == ScoreType::WdlMu
        && let Some(model) = WdlModel::fit(wl, d)
    {
        mu = model.mu;
        (wl, d) = model.wl_and_d();
    }
    let cp = |x: f64| Score::Cp(x as i32);
    let score = match (mate, score_type) {
        (Some(moves), _) => Score::Mate(moves),
        (None, ScoreType::Centipawn | ScoreType::CentipawnWithDrawscore) => {
            cp(90.0 * (1.563_754_189_7 * f64::from(wl)).tan())
        }
        (None, ScoreType::Centipawn2019) => {
            let wl64 = f64::from(wl);
            cp(f64::from(295.0 * wl) / (1.0 - 0.976_953_126 * wl64.powf(14.0)))
        }
        (None, ScoreType::Centipawn2018) => {
            cp(290.680_623_072 * (1.548_090_806 * f64::from(wl)).tan())
        }
        (None, ScoreType::WinPercentage) => cp(f64::from(wl * 5000.0 + 5000.0)),
        (None, ScoreType::Q | ScoreType::WMinusL) => cp(f64::from(wl * 10000.0)),
        (None, ScoreType::WdlMu) => {
            let fallback = (45.0 * (1.567_280_716_28 * f64::from(wl)).tan()) as f32;
            let use_mu = has_wdl
                && mu != 0.0
                && wl.abs() + d < 0.996
                && (mu.abs() < 1.0 || fallback.abs() < (100.0 * mu).abs());
            cp(f64::from(if use_mu { 100.0 * mu } else { fallback }))
        }
    };
    Shown {
        score,
        wdl: wdl_per_mille(wl, d),
    }
}

/// lc0's logistic model of W, D, L (see the module's documentation), in 32-bit floats.
#[derive(Debug, Clone, Copy, PartialEq)]
struct WdlModel {
    mu: f32,
    s: f32,
}

impl WdlModel {
    /// μ and s from W − L and D; `None` where W, D or L is within 0.0001 of 0 or 1.
    fn fit(wl: f32, d: f32) -> Option<Self> {
        let w = (1.0 + wl - d) / 2.0;
        let l = (1.0 - wl - d) / 2.0;
        const EPS: f32 = 0.0001;
        let inside = |p: f32| p > EPS && p < 1.0 - EPS;
        if !(inside(w) && inside(d) && inside(l)) {
            return None;
        }
        let a = fast_ln(1.0 / l - 1.0);
        let b = fast_ln(1.0 / w - 1.0);
        Some(Self {
            mu: (a - b) / (a + b),
            s: 2.0 / (a + b),
        })
    }

    /// W′ − L′ and D′ = max(0, 1 − W′ − L′) of the model.
    fn wl_and_d(self) -> (f32, f32) {
        let w = fast_logistic((-1.0 + self.mu) / self.s);
        let l = fast_logistic((-1.0 - self.mu) / self.s);
        (w - l, (1.0 - w - l).max(0.0))
    }
}

/// lc0's FastLog2: for x = 2ᴺ·(1 + f), 0 ≤ f < 1, log₂ x ≈ N + f·(1.3465552 − 0.34655523·f).
/// For positive finite x only.
fn fast_log2(x: f32) -> f32 {
    let bits = x.to_bits();
    let exponent = bits >> 23;
    let f = f32::from_bits((bits & 0x007f_ffff) | (127 << 23)) - 1.0;
    f * (1.346_555_2 - 0.346_555_23 * f) - 127.0 + exponent as f32
}

/// lc0's FastLog: ln x ≈ ln 2 · FastLog2(x).
fn fast_ln(x: f32) -> f32 {
    std::f32::consts::LN_2 * fast_log2(x)
}

/// lc0's FastExp2: for x = N + f, 0 ≤ f < 1, 2ˣ ≈ 2ᴺ·(1 + f·(0.6602339 + 0.33976606·f)), the
/// power of two added to the float's exponent field; 0 below −126. For a negative x, N is
/// x − 1 truncated toward zero (one less than ⌊x⌋ at whole numbers, where f = 1 then gives
/// the same value).
fn fast_exp2(x: f32) -> f32 {
    let n = if x < 0.0 {
        if x < -126.0 {
            return 0.0;
        }
        (x - 1.0) as i32
    } else {
        x as i32
    };
    let f = x - n as f32;
    let mantissa = 1.0 + f * (0.660_233_9 + 0.339_766_06 * f);
    f32::from_bits(mantissa.to_bits().wrapping_add((n as u32) << 23))
}

/// lc0's FastLogistic: 1/(1 + e⁻ˣ) with e⁻ˣ = FastExp2(log₂e·(−x)); exactly 1 above 20 and 0
/// below −20.
fn fast_logistic(x: f32) -> f32 {
    if x > 20.0 {
        1.0
    } else if x < -20.0 {
        0.0
    } else {
        1.0 / (1.0 + fast_exp2(std::f32::consts::LOG2_E * -x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cp(score_type: ScoreType, wl: f32, d: f32) -> i32 {
        match shown(wl, d, None, score_type, true).score {
            Score::Cp(cp) => cp,
            Score::Mate(m) => panic!("mate {m}"),
        }
    }

    #[test]
    fn names_are_lc0s_and_the_default_is_wdl_mu() {
        let names: Vec<&str> = ScoreType::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "centipawn",
                "centipawn_with_drawscore",
                "centipawn_2019",
                "centipawn_2018",
                "win_percentage",
                "Q",
                "W-L",
                "WDL_mu"
            ]
        );
        assert_eq!(ScoreType::default(), ScoreType::WdlMu);
        for t in ScoreType::ALL {
            assert_eq!(ScoreType::from_name(t.name()), Some(t));
        }
        assert_eq!(ScoreType::from_name("wdl_mu"), None);
        assert_eq!(ScoreType::from_name("cp"), None);
    }

    // The expected values below are lc0's formulas evaluated by hand (bc -l, 20 digits, at the
    // f32 value of each input: 0.3 is 0.300000011920928955078125, 0.9 is
    // 0.89999997615814208984375), then truncated toward zero as lc0 truncates; where rounding
    // would print another value it is said.

    #[test]
    fn centipawn_formulas() {
        use ScoreType::*;
        // 90·tan(1.5637541897·0.3) = 45.618 → 45 (rounding: 46); −89.368 at −0.5; 545.825 at
        // 0.9. With DrawScore 0, centipawn_with_drawscore is the same.
        for t in [Centipawn, CentipawnWithDrawscore] {
            assert_eq!(cp(t, 0.3, 0.5), 45);
            assert_eq!(cp(t, -0.5, 0.3), -89);
            assert_eq!(cp(t, 0.9, 0.05), 545);
            assert_eq!(cp(t, 0.0, 0.5), 0);
        }
        // 295·0.3/(1 − 0.976953126·0.3¹⁴) = 88.50001 → 88; −147.509 at −0.5 (rounding: −148);
        // 341.917 at 0.9.
        assert_eq!(cp(Centipawn2019, 0.3, 0.5), 88);
        assert_eq!(cp(Centipawn2019, -0.5, 0.3), -147);
        assert_eq!(cp(Centipawn2019, 0.9, 0.05), 341);
        // 290.680623072·tan(1.548090806·0.3) = 145.624 → 145 (rounding: 146); −284.154 at
        // −0.5; 1620.266 at 0.9.
        assert_eq!(cp(Centipawn2018, 0.3, 0.5), 145);
        assert_eq!(cp(Centipawn2018, -0.5, 0.3), -284);
        assert_eq!(cp(Centipawn2018, 0.9, 0.05), 1620);
    }

    #[test]
    fn linear_formulas() {
        use ScoreType::*;
        // 5000·0.3 + 5000 = 6500.00006 → 6500; 5000·(−0.5) + 5000 = 2500.
        assert_eq!(cp(WinPercentage, 0.3, 0.5), 6500);
        assert_eq!(cp(WinPercentage, -0.5, 0.3), 2500);
        // 10000·0.3 = 3000.0001 → 3000; 10000·(−0.12345) = −1234.5 → −1234 (rounding: −1235).
        for t in [Q, WMinusL] {
            assert_eq!(cp(t, 0.3, 0.5), 3000);
            assert_eq!(cp(t, -0.12345, 0.5), -1234);
            assert_eq!(cp(t, 1.0, 0.0), 10000);
        }
    }

    #[test]
    fn wdl_mu_is_the_logistic_models_mu() {
        use ScoreType::WdlMu;
        // W 0.3, D 0.5, L 0.2: a = ln(1/0.2 − 1) = ln 4 = 1.386294, b = ln(1/0.3 − 1) =
        // ln(7/3) = 0.847298; μ = (a − b)/(a + b) = 0.538997/2.233592 = 0.241314 → 24.
        assert_eq!(cp(WdlMu, 0.1, 0.5), 24);
        // W 0.1, D 0.3, L 0.6: a = ln(2/3) = −0.405465, b = ln 9 = 2.197225; μ = −2.602690 /
        // 1.791759 = −1.452584: |μ| ≥ 1, but the fallback 45·tan(1.56728071628·(−0.5)) =
        // −44.84 is smaller, so 100·μ = −145.26 → −145.
        assert_eq!(cp(WdlMu, -0.5, 0.3), -145);
        // W 0.5, D 0.45, L 0.05: b = ln 1 = 0 (FastLog too: f = 0, N = 0), so μ = 1 exactly;
        // not below 1, but the fallback 45·tan(1.56728071628·0.45) = 38.3 is smaller → 100.
        assert_eq!(cp(WdlMu, 0.45, 0.45), 100);
        // Even: W = L gives a = b, μ = 0, and 45·tan(0) = 0.
        assert_eq!(cp(WdlMu, 0.0, 0.5), 0);
        // No D (a network without a WDL head, or a proven draw's D of 1): W, D or L outside
        // (0.0001, 0.9999), μ = 0, the fallback 45·tan(1.56728071628·0.5) = 44.842 → 44.
        assert_eq!(cp(WdlMu, 0.5, 0.0), 44);
        assert_eq!(cp(WdlMu, 0.0, 1.0), 0);
        // Without a WDL head the fallback is taken also where μ is reasonable: W′ − L′ = 0.102
        // (W, D, L 0.3, 0.5, 0.2 through the model), 45·tan(1.56728071628·0.102) = 7.25 → 7.
        let no_head = shown(0.1, 0.5, None, WdlMu, false).score;
        assert_eq!(no_head, Score::Cp(7));
    }

    #[test]
    fn wdl_mu_uses_lc0s_fast_logarithm() {
        // W 0.325, D 0.6, L 0.075. Exactly: a = ln(1/0.075 − 1) = ln 12.333333 = 2.512306,
        // b = ln(1/0.325 − 1) = ln 2.076923 = 0.730888, μ = 1.781418/3.243194 = 0.549279 → 54.
        // lc0's FastLog2(x), x = 2ᴺ·(1 + f), is N + f·(1.3465552 − 0.34655523·f):
        // 12.333333 = 2³·1.5416666 → 3 + 0.5416666·1.1588378 = 3.6277008, a = ln 2·that =
        // 2.5145307; 2.0769231 = 2¹·1.0384615 → 1 + 0.0384615·1.3332262 = 1.0512779, b =
        // 0.7286898; μ = 1.7858409/3.2432205 = 0.5506381 → 55, what lc0 prints.
        assert_eq!(cp(ScoreType::WdlMu, 0.25, 0.6), 55);
        // W 0.97, D 0.025, L 0.005 (|W − L| + D = 0.99 < 0.996): μ = 4.82, but the fallback
        // 45·tan(1.56728071628·(W′ − L′)) is larger and taken. With exact functions W′ − L′
        // is 0.965 and the fallback 770.06 → 770; through lc0's FastLog and FastLogistic
        // (evaluated step by step in float32 in Python, and by lc0's own C++ on the same
        // inputs) W′ − L′ = 0.9649876 and 45·tan(1.56728071628·0.9649876) = 769.81 → 769.
        assert_eq!(cp(ScoreType::WdlMu, 0.965, 0.025), 769);
    }

    #[test]
    fn wdl_mu_shows_the_models_wdl() {
        // W = L = 0.25, D = 0.5: a = b = FastLog(3) = ln 2·(1 + 0.5·(1.3465552 − 0.1732776)) =
        // ln 2·1.5866388 = 1.0997746, s = 2/(a + b) = 1/1.0997746, μ = 0. W′ = L′ =
        // 1/(1 + FastExp(1.0997746)), FastExp(x) = FastExp2(log₂e·x) = FastExp2(1.5866388) =
        // 2¹·(1 + 0.5866388·(0.6602339 + 0.33976606·0.5866388)) = 3.0084954, so W′ = L′ =
        // 1/4.0084954 = 0.249470, D′ = 0.501060: W = round(500·(1 + 0 − 0.501060)) = 249.
        let mu = shown(0.0, 0.5, None, ScoreType::WdlMu, true);
        assert_eq!(mu.wdl, [249, 502, 249]);
        // Every other score type shows the line's own W, D, L.
        let cp = shown(0.0, 0.5, None, ScoreType::Centipawn, true);
        assert_eq!(cp.wdl, [250, 500, 250]);
        // W 0.3, D 0.5, L 0.2 under WDL_mu: W′ = σ((μ − 1)/s) with the fast functions.
        let mu = shown(0.1, 0.5, None, ScoreType::WdlMu, true);
        assert_eq!(mu.wdl, [302, 498, 200]);
    }

    #[test]
    fn proven_results_are_mates_under_every_score_type() {
        for t in ScoreType::ALL {
            let win = shown(1.0, 0.0, Some(3), t, true);
            assert_eq!(win.score, Score::Mate(3), "{}", t.name());
            assert_eq!(win.wdl, [1000, 0, 0]);
            let loss = shown(-1.0, 0.0, Some(-2), t, true);
            assert_eq!(loss.score.to_string(), "mate -2");
            assert_eq!(loss.wdl, [0, 0, 1000]);
        }
    }
}
