//! The guard that keeps NaN and infinity away from a search: a backend whose pass produced a
//! non-finite value reports which layer did, instead of handing out NaN probabilities.
//! Weights are finite (checked at load), so a non-finite value means an overflow inside the
//! network (weights out of any trained range) or a device fault.

use super::BatchOutput;
use crate::board::POLICY_SIZE;

/// The first non-finite value of a pass: the layer (or output head) that produced it and the
/// position of the batch it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{layer} produced a non-finite value (NaN or infinity) for position {position} of the batch"
)]
pub struct NonFinite {
    pub layer: String,
    pub position: usize,
}

/// The exponent bits of an f32: all set exactly for NaN and the infinities.
const EXPONENT: u32 = 0x7f80_0000;
/// Values folded per step before looking for the culprit.
const CHUNK: usize = 1024;

/// The index of the first NaN or infinity in `values`. Each chunk is a branch-free maximum of
/// the masked exponent bits (it vectorises), so a pass over a batch's outputs costs about as
/// much as reading them once.
pub fn first_non_finite(values: &[f32]) -> Option<usize> {
    values.chunks(CHUNK).enumerate().find_map(|(c, chunk)| {
        let worst = chunk
            .iter()
            .fold(0u32, |m, v| m.max(v.to_bits() & EXPONENT));
        (worst == EXPONENT).then(|| c * CHUNK + chunk.iter().take_while(|v| v.is_finite()).count())
    })
}

/// Appends `values` to `out` and says whether all are finite: the check folded into the copy
/// (a branch-free maximum of the masked exponent bits), so that checking a downloaded output
/// costs no second pass over it.
pub fn extend_finite(out: &mut Vec<f32>, values: &[f32]) -> bool {
    let mut worst = 0u32;
    out.extend(values.iter().map(|&v| {
        worst = worst.max(v.to_bits() & EXPONENT);
        v
    }));
    worst != EXPONENT
}

/// Checks a layer's output of `per_position` values per position.
pub fn check_layer(values: &[f32], per_position: usize, layer: &str) -> Result<(), NonFinite> {
    match first_non_finite(values) {
        None => Ok(()),
        Some(index) => Err(NonFinite {
            layer: layer.to_owned(),
            position: index / per_position.max(1),
        }),
    }
}

/// Checks every output of a batch: the value head's Q and D, the moves-left head's M and the
/// policy head's logits.
pub fn check_outputs(out: &BatchOutput) -> Result<(), NonFinite> {
    check_layer(&out.q, 1, "value head (Q)")?;
    check_layer(&out.d, 1, "value head (D)")?;
    check_layer(&out.m, 1, "moves-left head")?;
    check_layer(&out.policy, POLICY_SIZE, "policy head")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_nan_or_infinity_anywhere() {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -f32::NAN] {
            for at in [0, 1, CHUNK - 1, CHUNK, 3 * CHUNK + 17, 5000 - 1] {
                let mut values = vec![1.5f32; 5000];
                values[at] = bad;
                values[4999.min(at + 3)] = bad;
                assert_eq!(first_non_finite(&values), Some(at), "{bad} at {at}");
            }
        }
    }

    #[test]
    fn copies_say_whether_every_value_was_finite() {
        let values: Vec<f32> = (0..3000).map(|i| i as f32 * 0.5 - 700.0).collect();
        let mut out = vec![9.0];
        assert!(extend_finite(&mut out, &values));
        assert_eq!(out[0], 9.0);
        assert_eq!(out[1..], values[..]);
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut with_bad = values.clone();
            with_bad[1234] = bad;
            let mut out = Vec::new();
            assert!(!extend_finite(&mut out, &with_bad), "{bad}");
            assert_eq!(out.len(), with_bad.len());
        }
    }

    #[test]
    fn extreme_finite_values_pass() {
        let values = [f32::MAX, f32::MIN, f32::MIN_POSITIVE, 1e-45, -0.0, 0.0];
        assert_eq!(first_non_finite(&values), None);
        assert_eq!(first_non_finite(&[]), None);
    }

    #[test]
    fn the_report_names_the_head_and_the_position() {
        let n = 3;
        let mut out = BatchOutput {
            q: vec![0.1; n],
            d: vec![0.2; n],
            m: vec![30.0; n],
            policy: vec![0.0; n * POLICY_SIZE],
        };
        assert_eq!(check_outputs(&out), Ok(()));
        out.policy[2 * POLICY_SIZE + 100] = f32::NAN;
        let error = check_outputs(&out).unwrap_err();
        assert_eq!((error.layer.as_str(), error.position), ("policy head", 2));
        out.m[1] = f32::INFINITY;
        assert_eq!(check_outputs(&out).unwrap_err().layer, "moves-left head");
    }
}
