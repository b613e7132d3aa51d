//! `random`: lc0's backend of the same name, for measuring and testing the search without a
//! network. Each position's outputs are a function of its input planes (and `seed`), so a
//! search is repeatable and a transposition gets the same evaluation; nothing is learned from
//! the weights but their input format.
//!
//! As lc0's: Q uniform in [−1, 1), D uniform in [0, 1 − |Q|), no moves left, and each policy
//! logit uniform in [0, 3) (after the softmax the least likely move has about 0.05 of the most
//! likely one's weight); `uniform=true` gives Q = D = 0 and equal logits; `delay=MS` sleeps
//! that long in every call, standing in for a network's time. Beyond lc0's: `policy_spread`
//! (the logits' range, 3 by default) and `q_spread` (Q uniform in [−q_spread, q_spread), 1 by
//! default) make the outputs look more like a trained net's (a sharper policy, calmer values),
//! whose searches build narrower, deeper trees than lc0's random outputs do.

use std::time::Duration;

use super::{
    Backend, BackendAttributes, BackendError, BackendOptions, BatchOutput, PickedOutput,
    PolicyPicks,
};
use crate::board::POLICY_SIZE;
use crate::chess::InputPlanes;
use crate::weights::Model;
use crate::weights::format::InputFormat;

const NAME: &str = "random";
const DEFAULT_MAX_BATCH: usize = 1024;
/// The logits' range by default (lc0's `a`).
const POLICY_SPREAD: f32 = 3.0;

pub struct RandomBackend {
    input: InputFormat,
    delay: Duration,
    seed: u64,
    uniform: bool,
    policy_spread: f32,
    q_spread: f32,
    max_batch: usize,
}

impl RandomBackend {
    /// Options: `delay` (ms a call, default 0), `seed` (default 0), `uniform` (default false),
    /// `policy_spread` (default 3), `q_spread` (default 1, at most 1), `max_batch` (default 1024).
    pub fn new(network: &Model, options: &BackendOptions) -> Result<Self, BackendError> {
        let max_batch = options
            .get::<usize>(NAME, "max_batch")?
            .unwrap_or(DEFAULT_MAX_BATCH);
        if max_batch == 0 {
            return Err(BackendError::BadOption {
                backend: NAME.to_owned(),
                key: "max_batch".to_owned(),
                value: "0".to_owned(),
                reason: "must be at least 1".to_owned(),
            });
        }
        let policy_spread = options
            .get::<f32>(NAME, "policy_spread")?
            .unwrap_or(POLICY_SPREAD);
        let q_spread = options.get::<f32>(NAME, "q_spread")?.unwrap_or(1.0);
        check_range("policy_spread", policy_spread, 0.0, 50.0)?;
        check_range("q_spread", q_spread, 0.0, 1.0)?;
        Ok(Self {
            input: network.format().input,
            policy_spread,
            q_spread,
            delay: Duration::from_millis(options.get::<u64>(NAME, "delay")?.unwrap_or(0)),
            seed: options.get::<u64>(NAME, "seed")?.unwrap_or(0),
            uniform: options.get::<bool>(NAME, "uniform")?.unwrap_or(false),
            max_batch,
        })
    }

    /// The hash a position's outputs are drawn from.
    fn position_hash(&self, planes: &InputPlanes) -> u64 {
        planes.iter().fold(mix(self.seed), |h, plane| {
            mix(mix(h ^ plane.mask) ^ u64::from(plane.value.to_bits()))
        })
    }

    /// A position's Q and D, and the hash its logits are drawn from.
    fn values(&self, planes: &InputPlanes) -> (f32, f32, u64) {
        if self.uniform {
            return (0.0, 0.0, 0);
        }
        let hash = self.position_hash(planes);
        let q = ((hash % 200_000) as f32 - 100_000.0) / 100_000.0 * self.q_spread;
        let d = (1.0 - q.abs()) * (mix(hash ^ 0x4d2) % 10_000) as f32 / 10_000.0;
        (q, d, hash)
    }

    /// The logit at policy index `index` of the position whose hash is `hash`. One multiply
    /// a logit (not a full mix): the call stays cheap next to the search it stands in for.
    fn logit(&self, hash: u64, index: usize) -> f32 {
        if self.uniform {
            return 1.0;
        }
        let x = (hash ^ index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ((x >> 40) % 10_000) as f32 * (self.policy_spread / 10_000.0)
    }

    /// Sleeps the `delay` a call is given.
    fn wait(&self) {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
    }
}

/// An error unless `value` of option `key` lies in `[low, high]` (NaN never does).
fn check_range(key: &str, value: f32, low: f32, high: f32) -> Result<(), BackendError> {
    if (low..=high).contains(&value) {
        return Ok(());
    }
    Err(BackendError::BadOption {
        backend: NAME.to_owned(),
        key: key.to_owned(),
        value: value.to_string(),
        reason: format!("must lie in [{low}, {high}]"),
    })
}

/// A splitmix64 step: every bit of the input reaches every bit of the output.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Backend for RandomBackend {
    fn name(&self) -> &str {
        NAME
    }

    /// A stand-in for a GPU (several search threads), so that the search measured is the one a
    /// GPU backend gets.
    fn attributes(&self) -> BackendAttributes {
        BackendAttributes {
            has_wdl: true,
            has_mlh: false,
            runs_on_cpu: false,
            max_batch: self.max_batch,
            recommended_batch: 256,
            recommended_threads: 2,
        }
    }

    fn input_format(&self) -> InputFormat {
        self.input
    }

    fn evaluate(&self, batch: &[InputPlanes]) -> Result<BatchOutput, BackendError> {
        BackendError::check_batch_size(NAME, batch.len(), self.max_batch)?;
        self.wait();
        let mut out = BatchOutput {
            q: Vec::with_capacity(batch.len()),
            d: Vec::with_capacity(batch.len()),
            m: vec![0.0; batch.len()],
            policy: Vec::with_capacity(batch.len() * POLICY_SIZE),
        };
        for planes in batch {
            let (q, d, hash) = self.values(planes);
            out.q.push(q);
            out.d.push(d);
            out.policy
                .extend((0..POLICY_SIZE).map(|index| self.logit(hash, index)));
        }
        Ok(out)
    }

    /// Draws only the picked logits, as lc0's draws only the legal moves' (a search with this
    /// backend then pays for nothing it does not read).
    fn evaluate_picked(
        &self,
        batch: &[InputPlanes],
        picks: &PolicyPicks,
    ) -> Result<PickedOutput, BackendError> {
        BackendError::check_picked(NAME, batch.len(), self.max_batch, picks.len())?;
        self.wait();
        let mut logits = Vec::with_capacity(picks.total());
        let (mut q, mut d) = (
            Vec::with_capacity(batch.len()),
            Vec::with_capacity(batch.len()),
        );
        for (i, planes) in batch.iter().enumerate() {
            let (value, draw, hash) = self.values(planes);
            q.push(value);
            d.push(draw);
            logits.extend(
                picks
                    .of(i)
                    .iter()
                    .map(|&index| self.logit(hash, index.into())),
            );
        }
        let m = vec![0.0; batch.len()];
        Ok(PickedOutput::new(q, d, m, logits, picks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::evaluate_in_passes;
    use crate::chess::{HistoryFill, PositionHistory, encode_position};
    use crate::netsource::NetSource;
    use crate::weights::LoadOptions;

    fn tiny() -> Model {
        let source = NetSource::parse(None).unwrap();
        source
            .load(&LoadOptions::default(), &mut |_, _| {})
            .unwrap()
            .0
    }

    fn backend(options: &str) -> RandomBackend {
        RandomBackend::new(&tiny(), &BackendOptions::parse(options).unwrap()).unwrap()
    }

    fn planes(spec: &str) -> InputPlanes {
        let history = PositionHistory::from_spec(spec).unwrap();
        encode_position(&history, InputFormat::Classical112, HistoryFill::FenOnly).planes
    }

    #[test]
    fn outputs_are_a_function_of_the_position_within_lc0s_ranges() {
        let b = backend("");
        let a = planes("startpos");
        let e4 = planes("startpos moves e2e4");
        let out = b.evaluate(&[a, e4, a]).unwrap();
        assert_eq!(out.len(), 3);
        assert_eq!(out.q[0], out.q[2]);
        assert_eq!(out.policy_of(0), out.policy_of(2));
        assert_ne!(out.policy_of(0), out.policy_of(1));
        for i in 0..3 {
            let [w, d, l] = out.wdl_of(i);
            assert!((-1.0..1.0).contains(&out.q[i]));
            assert!(w >= 0.0 && d >= 0.0 && l >= 0.0, "{:?}", [w, d, l]);
            assert!(out.policy_of(i).iter().all(|&p| (0.0..3.0).contains(&p)));
        }
        let other_seed = backend("seed=7").evaluate(&[a]).unwrap();
        assert_ne!(other_seed.q[0], out.q[0]);
    }

    #[test]
    fn spreads_scale_the_values_and_logits() {
        let batch: Vec<InputPlanes> = ["startpos", "startpos moves e2e4", "startpos moves d2d4"]
            .into_iter()
            .map(planes)
            .collect();
        let wide = backend("").evaluate(&batch).unwrap();
        let sharp = backend("policy_spread=9,q_spread=0.25")
            .evaluate(&batch)
            .unwrap();
        for i in 0..batch.len() {
            // The same draws, scaled: Q by a quarter, each logit by three.
            assert!((sharp.q[i] - wide.q[i] * 0.25).abs() < 1e-6);
            for (s, w) in sharp.policy_of(i).iter().zip(wide.policy_of(i)) {
                assert!((s - w * 3.0).abs() < 1e-4, "{s} vs {w}");
            }
        }
        for bad in [
            "q_spread=1.5",
            "q_spread=-0.1",
            "policy_spread=NaN",
            "policy_spread=51",
        ] {
            let err = RandomBackend::new(&tiny(), &BackendOptions::parse(bad).unwrap());
            let message = err.err().map(|e| e.to_string()).unwrap_or_default();
            let key = bad.split('=').next().unwrap();
            assert!(message.contains(key), "{bad}: {message}");
        }
    }

    #[test]
    fn picked_logits_are_those_of_the_full_policy() {
        let mut picks = PolicyPicks::default();
        picks.push([1857, 0, 400]);
        picks.push([]);
        picks.push([7, 7]);
        let batch = [
            planes("startpos"),
            planes("startpos moves e2e4"),
            planes("startpos moves d2d4"),
        ];
        for options in ["", "uniform=true", "seed=3"] {
            let b = backend(options);
            let full = b.evaluate(&batch).unwrap();
            let picked = b.evaluate_picked(&batch, &picks).unwrap();
            assert_eq!(
                (&picked.q, &picked.d, &picked.m),
                (&full.q, &full.d, &full.m)
            );
            for i in 0..batch.len() {
                let want: Vec<f32> = picks
                    .of(i)
                    .iter()
                    .map(|&j| full.policy_of(i)[usize::from(j)])
                    .collect();
                assert_eq!(picked.logits_of(i), want, "{options}: position {i}");
            }
        }
        assert!(
            backend("")
                .evaluate_picked(&batch, &PolicyPicks::default())
                .is_err()
        );
    }

    #[test]
    fn passes_of_max_batch_give_each_positions_own_outputs() {
        let specs = [
            "startpos",
            "startpos moves e2e4",
            "startpos moves d2d4 d7d5",
            "startpos moves g1f3",
            "startpos moves e2e4 c7c5",
            "startpos moves c2c4",
            "startpos moves e2e4 e7e5 g1f3",
        ];
        let batch: Vec<InputPlanes> = specs.iter().map(|s| planes(s)).collect();
        let one_by_one = backend("");
        for max_batch in [1, 3, 7, 64] {
            let b = backend(&format!("max_batch={max_batch}"));
            let all = evaluate_in_passes(&b, &batch).unwrap();
            assert_eq!(all.len(), specs.len(), "max_batch {max_batch}");
            for (i, p) in batch.iter().enumerate() {
                let own = one_by_one.evaluate(std::slice::from_ref(p)).unwrap();
                assert_eq!(
                    (all.q[i], all.d[i], all.m[i]),
                    (own.q[0], own.d[0], own.m[0]),
                    "max_batch {max_batch}, position {i}"
                );
                assert_eq!(all.policy_of(i), own.policy_of(0), "max_batch {max_batch}");
            }
        }
        assert!(evaluate_in_passes(&one_by_one, &[]).unwrap().is_empty());
    }

    #[test]
    fn uniform_mode_and_limits() {
        let out = backend("uniform=true")
            .evaluate(&[planes("startpos")])
            .unwrap();
        assert_eq!((out.q[0], out.d[0]), (0.0, 0.0));
        assert!(out.policy_of(0).iter().all(|&p| p == 1.0));
        let small = backend("max_batch=1");
        let two = [planes("startpos"), planes("startpos")];
        assert!(matches!(
            small.evaluate(&two),
            Err(BackendError::BatchTooLarge {
                size: 2,
                max: 1,
                ..
            })
        ));
        let net = tiny();
        for bad in ["max_batch=0", "delay=x", "speed=1"] {
            let options = BackendOptions::parse(bad).unwrap();
            let made = RandomBackend::new(&net, &options).and_then(|_| options.finish(NAME));
            assert!(made.is_err(), "{bad} was accepted");
        }
    }
}
