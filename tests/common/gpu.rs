//! Helpers the GPU test files share: a GPU backend against the cpu oracle, and the f64
//! LayerNorm the kernel tests compare with.

use lc0rs::backend::oracle::{
    MAX_D_ERROR, MAX_PROBABILITY_ERROR, MAX_Q_ERROR, compare, encode_all, evaluate_in_batches,
    random_histories,
};
use lc0rs::backend::{BatchOutput, PolicyPicks, create_backend, legal_move_probabilities, softmax};
use lc0rs::board::POLICY_SIZE;
use lc0rs::chess::policy_index::entry_moves_with_indices;
use lc0rs::netsource::NetSource;
use lc0rs::weights::format::Activation;
use lc0rs::weights::{LoadOptions, Model, Network};

pub fn bundled(name: &str) -> Network {
    NetSource::parse(Some(name))
        .unwrap()
        .load(&LoadOptions::default(), &mut |_, _| {})
        .unwrap()
        .0
        .into_attention()
        .expect("an attention-body network")
}

/// `backend` with each of `option_sets` against the cpu oracle on 100 random positions, at
/// batch sizes 1, 7 and 64, each twice (the eager first pass, then the captured graph).
pub fn check_backend_against_cpu<N: Clone + Into<Model>>(
    backend: &str,
    label: &str,
    network: &N,
    option_sets: &[&str],
) {
    check_backend_against_cpu_on(backend, label, network, option_sets, 100, &[1, 7, 64]);
}

/// [`check_backend_against_cpu`] on `positions` random positions at `batches` (an emulated GPU
/// takes about 0.3 s per pass at batch 1, so it gets fewer).
pub fn check_backend_against_cpu_on<N: Clone + Into<Model>>(
    backend: &str,
    label: &str,
    network: &N,
    option_sets: &[&str],
    positions: usize,
    batches: &[usize],
) {
    let oracle = create_backend("cpu", network.clone(), "").unwrap();
    for options in option_sets {
        let gpu = create_backend(backend, network.clone(), options)
            .unwrap_or_else(|e| panic!("{backend} with {options:?}: {e}"));
        let histories = random_histories(positions, 5);
        let encoded = encode_all(&histories, gpu.as_ref());
        let want = evaluate_in_batches(oracle.as_ref(), &encoded, 64).unwrap();
        for &batch in batches {
            for run in 0..2 {
                let got = evaluate_in_batches(gpu.as_ref(), &encoded, batch).unwrap();
                let e = compare(&histories, &encoded, &got, &want, batch);
                eprintln!("{label} {options} batch {batch} run {run}: {e:?}");
                assert!(
                    e.passed(),
                    "{label} {options} batch {batch} run {run}: {e:?}"
                );
            }
        }
    }
}

/// `backend`'s picked logits (each position's legal moves, as a search asks, gathered on the
/// device; every logit, more picks than that gather takes; and none) against the cpu oracle's full
/// outputs, with each of `option_sets`, on 40 random positions in batches of `batches`: as many
/// logits as legal moves, their probabilities, Q and D within the selftest limits.
pub fn check_picked_against_cpu<N: Clone + Into<Model>>(
    backend: &str,
    network: &N,
    option_sets: &[&str],
    batches: &[usize],
) {
    let oracle = create_backend("cpu", network.clone(), "").unwrap();
    let histories = random_histories(40, 17);
    let encoded = encode_all(&histories, oracle.as_ref());
    let want = evaluate_in_batches(oracle.as_ref(), &encoded, 64).unwrap();
    let legal: Vec<_> = histories
        .iter()
        .zip(&encoded)
        .map(|(history, enc)| entry_moves_with_indices(history.last(), enc.transform))
        .collect();
    for options in option_sets {
        let gpu = create_backend(backend, network.clone(), options)
            .unwrap_or_else(|e| panic!("{backend} with {options:?}: {e}"));
        for &batch in batches {
            for (chunk, start) in encoded.chunks(batch).zip((0..).step_by(batch)) {
                let moves = legal[start..start + chunk.len()].iter();
                let picks = PolicyPicks::of_legal_moves(moves.map(Vec::as_slice));
                let planes: Vec<_> = chunk.iter().map(|e| e.planes).collect();
                let got = gpu.evaluate_picked(&planes, &picks).unwrap();
                // Every logit of each position, in reverse: more picks than the device's
                // gather takes (the whole policy is read instead).
                let mut every = PolicyPicks::default();
                chunk
                    .iter()
                    .for_each(|_| every.push((0..POLICY_SIZE).rev()));
                let all = gpu.evaluate_picked(&planes, &every).unwrap();
                // No logits at all (lc0's backendbench asks for none): Q and D alone.
                let mut nothing = PolicyPicks::default();
                chunk.iter().for_each(|_| nothing.push([]));
                let bare = gpu.evaluate_picked(&planes, &nothing).unwrap();
                for (k, i) in (start..start + chunk.len()).enumerate() {
                    let label = format!("{options:?} batch {batch} position {i}");
                    let mut p_all = softmax(all.logits_of(k), 1.0);
                    p_all.reverse();
                    for (x, y) in p_all.iter().zip(&softmax(want.policy_of(i), 1.0)) {
                        let error = f64::from((x - y).abs());
                        assert!(
                            error <= MAX_PROBABILITY_ERROR,
                            "{label}, every logit: {x} against {y}"
                        );
                    }
                    assert!(bare.logits_of(k).is_empty(), "{label}, no picks");
                    let q_error = f64::from((bare.q[k] - want.q[i]).abs());
                    let d_error = f64::from((bare.d[k] - want.d[i]).abs());
                    assert!(
                        q_error <= MAX_Q_ERROR && d_error <= MAX_D_ERROR,
                        "{label}, no picks"
                    );
                    assert_eq!(got.logits_of(k).len(), legal[i].len(), "{label}");
                    let p_got = softmax(got.logits_of(k), 1.0);
                    let p_want = legal_move_probabilities(want.policy_of(i), &legal[i], 1.0);
                    for (x, y) in p_got.iter().zip(&p_want) {
                        let error = f64::from((x - y).abs());
                        assert!(error <= MAX_PROBABILITY_ERROR, "{label}: {x} against {y}");
                    }
                    assert!(
                        f64::from((got.q[k] - want.q[i]).abs()) <= MAX_Q_ERROR,
                        "{label}"
                    );
                    assert!(
                        f64::from((got.d[k] - want.d[i]).abs()) <= MAX_D_ERROR,
                        "{label}"
                    );
                }
            }
        }
    }
}

/// `backend` with `options` against the cpu oracle with `oracle_options` on 64 random positions
/// (games from `seed`), in batches of `batch`; asserts the selftest limits and returns what the
/// GPU gave.
pub fn check_against_cpu<N: Clone + Into<Model>>(
    backend: &str,
    network: &N,
    (options, oracle_options): (&str, &str),
    seed: u64,
    batch: usize,
) -> BatchOutput {
    let oracle = create_backend("cpu", network.clone(), oracle_options).unwrap();
    let gpu = create_backend(backend, network.clone(), options).unwrap();
    let histories = random_histories(64, seed);
    let encoded = encode_all(&histories, gpu.as_ref());
    let want = evaluate_in_batches(oracle.as_ref(), &encoded, 64).unwrap();
    let got = evaluate_in_batches(gpu.as_ref(), &encoded, batch).unwrap();
    let e = compare(&histories, &encoded, &got, &want, batch);
    eprintln!("{options}: {e:?}");
    assert!(e.passed(), "{options}: {e:?}");
    got
}

/// The first passes right after `backend` is created, with nothing in between: every weight
/// must be on the device before (or stream-ordered before) any pass reads it, on the lane that
/// uploaded the weights and on a second lane made at once by a concurrent first call
/// (`lanes=2`). `rounds` fresh backends, each hit by two threads released together as soon as it
/// exists; the cpu oracle's answers are computed beforehand so that no host work sits between
/// creation and the first passes.
pub fn check_first_passes_right_after_creation(backend: &str, network: &Network, rounds: usize) {
    let oracle = create_backend("cpu", network.clone(), "").unwrap();
    let histories = random_histories(24, 41);
    let encoded = encode_all(&histories, oracle.as_ref());
    let want = evaluate_in_batches(oracle.as_ref(), &encoded, 24).unwrap();
    for round in 0..rounds {
        let gpu = create_backend(backend, network.clone(), "lanes=2")
            .unwrap_or_else(|e| panic!("{backend}: {e}"));
        let start = std::sync::Barrier::new(2);
        std::thread::scope(|scope| {
            for batch in [24, 5] {
                let (gpu, start, histories, encoded, want) =
                    (&gpu, &start, &histories, &encoded, &want);
                scope.spawn(move || {
                    start.wait();
                    let got = evaluate_in_batches(gpu.as_ref(), encoded, batch).unwrap();
                    let e = compare(histories, encoded, &got, want, batch);
                    eprintln!("round {round} batch {batch} (first pass after creation): {e:?}");
                    assert!(e.passed(), "round {round} batch {batch}: {e:?}");
                });
            }
        });
    }
}

/// The larger of two errors, where a NaN error (an output left poisoned, never written) is
/// infinitely bad: `f64::max` would drop it.
pub fn worse(worst: f64, error: f64) -> f64 {
    if error.is_nan() {
        f64::INFINITY
    } else {
        worst.max(error)
    }
}

/// The largest difference between `got` (`rows × cols`) and LayerNorm in f64 (biased variance,
/// eps 1e-6) of the rows `pre(r, c)`, scaled by `gamma` and shifted by `beta`.
pub fn layer_norm_error(
    (rows, cols): (usize, usize),
    pre: impl Fn(usize, usize) -> f64,
    gamma: &[f32],
    beta: &[f32],
    got: &[f32],
) -> f64 {
    layer_norm_f64((rows, cols), pre, gamma, beta)
        .iter()
        .zip(got)
        .fold(0.0, |worst, (want, &got)| {
            worse(worst, (f64::from(got) - want).abs())
        })
}

/// LayerNorm in f64 (biased variance, eps 1e-6) of the rows `pre(r, c)`, row-major.
pub fn layer_norm_f64(
    (rows, cols): (usize, usize),
    pre: impl Fn(usize, usize) -> f64,
    gamma: &[f32],
    beta: &[f32],
) -> Vec<f64> {
    let mut out = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let v: Vec<f64> = (0..cols).map(|c| pre(r, c)).collect();
        let mean = v.iter().sum::<f64>() / cols as f64;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / cols as f64;
        out.extend((0..cols).map(|c| {
            (v[c] - mean) / (var + 1e-6).sqrt() * f64::from(gamma[c]) + f64::from(beta[c])
        }));
    }
    out
}

/// The activations the kernel checks use, in f64 from their definitions.
pub fn activate_f64(act: Activation, v: f64) -> f64 {
    match act {
        Activation::Identity => v,
        Activation::Relu => v.max(0.0),
        Activation::Relu2 => v.max(0.0).powi(2),
        Activation::Swish => v / (1.0 + (-v).exp()),
        Activation::Mish => v * (1.0 + v.exp()).ln().tanh(),
        Activation::Tanh => v.tanh(),
        _ => unreachable!("no kernel check uses {act:?}"),
    }
}

/// `backend` with `options` called from four threads at once (so that its lanes run batches
/// side by side) against the cpu oracle: each thread evaluates the same 100 random positions
/// three times in its own batch size (1, 7, 33, 64); every result must pass the selftest limits.
/// Returns the backend's memory report, which says how many lanes were made.
pub fn check_concurrent_against_cpu(backend: &str, network: &Network, options: &str) -> String {
    let oracle = create_backend("cpu", network.clone(), "").unwrap();
    let gpu = create_backend(backend, network.clone(), options).unwrap();
    let histories = random_histories(100, 17);
    let encoded = encode_all(&histories, gpu.as_ref());
    let want = evaluate_in_batches(oracle.as_ref(), &encoded, 64).unwrap();
    let start = std::sync::Barrier::new(4);
    std::thread::scope(|scope| {
        for batch in [1, 7, 33, 64] {
            let (gpu, start, histories, encoded, want) =
                (&gpu, &start, &histories, &encoded, &want);
            scope.spawn(move || {
                start.wait();
                for run in 0..3 {
                    let got = evaluate_in_batches(gpu.as_ref(), encoded, batch).unwrap();
                    let e = compare(histories, encoded, &got, want, batch);
                    assert!(
                        e.passed(),
                        "{options} batch {batch} run {run} (concurrent): {e:?}"
                    );
                }
            });
        }
    });
    gpu.memory_report().unwrap_or_default()
}

/// A network whose weights overflow fp16 inside `encoder[1]` (1e4 × 64 inputs > 65504): the
/// GPU backend must report a non-finite output instead of returning NaN or infinity.
pub fn check_overflow_is_reported(backend: &str) {
    let mut network = bundled("bundled:tiny");
    network.encoders[1].ffn.dense1.weights.fill(1e4);
    let gpu = create_backend(backend, network, "").unwrap();
    let histories = random_histories(3, 5);
    let encoded = encode_all(&histories, gpu.as_ref());
    match evaluate_in_batches(gpu.as_ref(), &encoded, 3) {
        Ok(out) => panic!("{backend} returned outputs: Q {:?}", out.q),
        Err(e) => assert!(e.to_string().contains("non-finite"), "{backend}: {e}"),
    }
}
