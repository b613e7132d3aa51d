//! The multi-GPU backend over stand-in GPUs: backends whose outputs name the position (its
//! first plane's value) and the GPU that computed it, at a set time per position.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::*;
use crate::board::POLICY_SIZE;
use crate::chess::InputPlane;

/// The end of a stand-in's call that is spun rather than slept (longer than a timer tick).
const SPIN_TAIL: Duration = Duration::from_millis(2);

/// A stand-in GPU: Q is the position's number (its first plane's value), every policy logit
/// the GPU's ordinal; each call takes `per_row` a position; `broken` makes it fail.
struct StandIn {
    ordinal: usize,
    per_row: Duration,
    broken: Arc<AtomicBool>,
    calls: Arc<Mutex<Vec<usize>>>,
}

impl Backend for StandIn {
    fn name(&self) -> &str {
        "stand-in"
    }
    fn attributes(&self) -> BackendAttributes {
        BackendAttributes {
            has_wdl: true,
            has_mlh: false,
            runs_on_cpu: false,
            max_batch: 512,
            recommended_batch: 64,
            recommended_threads: 2,
        }
    }
    fn input_format(&self) -> InputFormat {
        InputFormat::Classical112
    }
    fn evaluate(&self, batch: &[InputPlanes]) -> Result<BatchOutput, BackendError> {
        self.calls.lock().unwrap().push(batch.len());
        // Slept while more than SPIN_TAIL is left, then spun: a sleep may end a timer tick
        // late (about 1 ms under Wine and on Windows), and a thread that only spins is
        // preempted on a busy machine; either way the time would no longer follow the
        // positions.
        let until = Instant::now() + self.per_row * batch.len() as u32;
        let left = until.saturating_duration_since(Instant::now());
        if let Some(sleep) = left.checked_sub(SPIN_TAIL) {
            std::thread::sleep(sleep);
        }
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        if self.broken.load(Ordering::Relaxed) {
            return Err(BackendError::BatchTooLarge {
                backend: format!("stand-in GPU {}", self.ordinal),
                size: batch.len(),
                max: 0,
            });
        }
        let mut out = BatchOutput::default();
        for planes in batch {
            out.q.push(planes[0].value);
            out.d.push(0.0);
            out.m.push(0.0);
            out.policy
                .extend(std::iter::repeat_n(self.ordinal as f32, POLICY_SIZE));
        }
        Ok(out)
    }
}

struct Rig {
    backend: MultiGpu,
    broken: Vec<Arc<AtomicBool>>,
    calls: Vec<Arc<Mutex<Vec<usize>>>>,
}

/// GPUs with ordinals `ordinals` taking `micros[i]` µs a position.
fn rig(ordinals: &[usize], micros: &[u64], policy: SharePolicy) -> Rig {
    let broken: Vec<_> = ordinals.iter().map(|_| Arc::default()).collect();
    let calls: Vec<_> = ordinals.iter().map(|_| Arc::default()).collect();
    let members = ordinals
        .iter()
        .zip(micros)
        .enumerate()
        .map(|(i, (&ordinal, &us))| {
            let gpu: Box<dyn Backend> = Box::new(StandIn {
                ordinal,
                per_row: Duration::from_micros(us),
                broken: Arc::clone(&broken[i]),
                calls: Arc::clone(&calls[i]),
            });
            (ordinal, gpu)
        })
        .collect();
    Rig {
        backend: MultiGpu::new("stand-in", members, policy),
        broken,
        calls,
    }
}

/// Positions numbered 0..n (the number in the first plane).
fn batch(n: usize) -> Vec<InputPlanes> {
    (0..n)
        .map(|i| {
            let mut planes = [InputPlane {
                mask: 0,
                value: 0.0,
            }; crate::board::INPUT_PLANES];
            planes[0].value = i as f32;
            planes
        })
        .collect()
}

fn numbers(out: &BatchOutput) -> Vec<f32> {
    out.q.clone()
}

const SPLIT: SharePolicy = SharePolicy::Split { min_rows: 8 };

#[test]
fn sizes_follow_the_weights_and_sum_to_the_batch() {
    assert_eq!(proportional_sizes(10, &[1.0, 1.0]), [5, 5]);
    assert_eq!(proportional_sizes(11, &[1.0, 1.0]), [6, 5]);
    assert_eq!(proportional_sizes(100, &[3.0, 1.0]), [75, 25]);
    assert_eq!(proportional_sizes(10, &[1.0, 1.0, 1.0]), [4, 3, 3]);
    assert_eq!(proportional_sizes(7, &[0.05, 0.95]), [0, 7]);
    for n in [1, 2, 63, 64, 1000, 1024] {
        let sizes = proportional_sizes(n, &[0.3, 0.5, 0.2, 1.7]);
        assert_eq!(sizes.iter().sum::<usize>(), n, "{n}: {sizes:?}");
    }
}

#[test]
fn a_split_batch_comes_back_in_order_with_every_gpu_used() {
    let rig = rig(&[0, 3, 5], &[0, 0, 0], SPLIT);
    for n in [1, 7, 8, 16, 24, 100, 512] {
        let out = rig.backend.evaluate(&batch(n)).unwrap();
        let expected: Vec<f32> = (0..n).map(|i| i as f32).collect();
        assert_eq!(numbers(&out), expected, "batch {n}");
        assert_eq!(out.policy.len(), n * POLICY_SIZE);
    }
    // 100 and 512 positions were split three ways, 24 too (three parts of 8); 16 two ways.
    for calls in &rig.calls {
        assert!(calls.lock().unwrap().len() >= 3, "{:?}", rig.calls);
    }
}

#[test]
fn picked_logits_of_a_split_batch_come_back_with_their_positions() {
    for policy in [SPLIT, SharePolicy::RoundRobin] {
        let rig = rig(&[0, 3, 5], &[0, 0, 0], policy);
        for n in [1, 7, 24, 100] {
            // Position i picks i % 5 logits, so that a part's picks out of place show in
            // their number.
            let mut picks = PolicyPicks::default();
            for i in 0..n {
                picks.push((0..i % 5).map(|k| 100 * k));
            }
            let out = rig.backend.evaluate_picked(&batch(n), &picks).unwrap();
            let expected: Vec<f32> = (0..n).map(|i| i as f32).collect();
            assert_eq!(out.q, expected, "batch {n}");
            for i in 0..n {
                let logits = out.logits_of(i);
                assert_eq!(logits.len(), i % 5, "batch {n}, position {i}");
                // Every logit of a stand-in is its GPU's ordinal: one of the rig's.
                assert!(logits.iter().all(|&l| [0.0, 3.0, 5.0].contains(&l)));
            }
        }
        let mismatch = rig
            .backend
            .evaluate_picked(&batch(3), &PolicyPicks::default());
        assert!(matches!(
            mismatch,
            Err(BackendError::PicksMismatch {
                picks: 0,
                batch: 3,
                ..
            })
        ));
    }
}

#[test]
fn a_small_batch_runs_whole_on_one_gpu_the_gpus_taking_turns() {
    let rig = rig(&[0, 1], &[0, 0], SPLIT);
    for _ in 0..4 {
        rig.backend.evaluate(&batch(15)).unwrap();
    }
    let calls: Vec<Vec<usize>> = rig
        .calls
        .iter()
        .map(|c| c.lock().unwrap().clone())
        .collect();
    assert_eq!(calls, [vec![15, 15], vec![15, 15]]);
}

#[test]
fn a_failing_gpu_fails_the_call_with_its_error() {
    let rig = rig(&[0, 2], &[0, 0], SPLIT);
    rig.broken[1].store(true, Ordering::Relaxed);
    let error = rig.backend.evaluate(&batch(64)).unwrap_err().to_string();
    assert!(error.contains("stand-in GPU 2"), "{error}");
    let rr = self::rig(&[0, 2], &[0, 0], SharePolicy::RoundRobin);
    rr.broken[0].store(true, Ordering::Relaxed);
    let failures = (0..4)
        .filter(|_| rr.backend.evaluate(&batch(4)).is_err())
        .count();
    assert_eq!(
        failures, 2,
        "every call dealt to the broken GPU fails, the others do not"
    );
}

#[test]
fn round_robin_deals_whole_calls_to_every_gpu() {
    let rig = rig(&[0, 1, 2], &[20, 20, 20], SharePolicy::RoundRobin);
    std::thread::scope(|scope| {
        for _ in 0..6 {
            scope.spawn(|| {
                for _ in 0..10 {
                    let out = rig.backend.evaluate(&batch(30)).unwrap();
                    let expected: Vec<f32> = (0..30).map(|i| i as f32).collect();
                    assert_eq!(numbers(&out), expected);
                    // One GPU computed the whole call.
                    let gpu = out.policy[0];
                    assert!(out.policy.iter().all(|&x| x == gpu));
                }
            });
        }
    });
    let counts: Vec<usize> = rig.calls.iter().map(|c| c.lock().unwrap().len()).collect();
    assert_eq!(counts.iter().sum::<usize>(), 60);
    // 20 each when the calls take equal turns; a busy machine that delays one caller while its
    // call is in flight moves the next calls elsewhere, so only a floor is asserted.
    assert!(counts.iter().all(|&c| c >= 5), "calls per GPU: {counts:?}");
}

#[test]
fn the_shares_settle_where_the_parts_finish_together() {
    // Modelled times (GPU 1 three times as slow a position, plus a fixed 0.2 ms a pass): the
    // weights move until both parts take as long, near 3:1.
    let parts = |sizes: &[usize]| {
        let mut start = 0;
        sizes
            .iter()
            .enumerate()
            .map(|(member, &size)| {
                start += size;
                Part {
                    member,
                    rows: start - size..start,
                }
            })
            .collect::<Vec<_>>()
    };
    let mut weights = vec![1.0, 1.0];
    let mut sizes = Vec::new();
    for _ in 0..30 {
        sizes = proportional_sizes(256, &weights);
        let seconds = [2e-4 + 1e-5 * sizes[0] as f64, 2e-4 + 3e-5 * sizes[1] as f64];
        rebalance(&mut weights, &parts(&sizes), &seconds);
    }
    let ratio = sizes[0] as f64 / sizes[1] as f64;
    assert!((2.6..3.4).contains(&ratio), "parts {sizes:?}");
    // A GPU that was slow once keeps a share to be timed again.
    let mut weights = vec![1.0, 1.0];
    for _ in 0..100 {
        rebalance(&mut weights, &parts(&[128, 128]), &[1.0, 1e-6]);
    }
    assert!(weights[0] >= SMALLEST_SHARE, "weights {weights:?}");
}

#[test]
fn a_slower_gpu_is_given_a_smaller_share() {
    // GPU 1 takes three times as long a position as GPU 0, timed on this machine's clock: its
    // parts end smaller (only the direction is asserted, as a busy machine delays a part now
    // and then; the settling point is checked on modelled times above). Parts of several ms,
    // mostly slept, so that neither a late timer tick nor a preempted thread turns the order.
    let rig = rig(&[0, 1], &[100, 300], SPLIT);
    for _ in 0..40 {
        rig.backend.evaluate(&batch(256)).unwrap();
    }
    let last = |i: usize| {
        rig.calls[i]
            .lock()
            .unwrap()
            .iter()
            .rev()
            .take(10)
            .sum::<usize>()
    };
    assert!(last(0) > last(1) * 5 / 4, "parts {} : {}", last(0), last(1));
    let usage = rig.backend.usage_report().unwrap();
    assert!(
        usage.contains("GPU 0: ") && usage.contains("GPU 1: "),
        "{usage}"
    );
}

#[test]
fn attributes_size_the_search_to_the_policy() {
    let split = rig(&[0, 1, 2], &[0, 0, 0], SPLIT).backend.attributes();
    assert_eq!(
        (split.recommended_batch, split.recommended_threads),
        (192, 2)
    );
    let rr = rig(&[0, 1, 2], &[0, 0, 0], SharePolicy::RoundRobin)
        .backend
        .attributes();
    assert_eq!((rr.recommended_batch, rr.recommended_threads), (64, 6));
    assert_eq!(rr.max_batch, 512);
    let too_many = rig(&[0, 1], &[0, 0], SPLIT).backend.evaluate(&batch(513));
    assert!(matches!(
        too_many,
        Err(BackendError::BatchTooLarge { max: 512, .. })
    ));
}
