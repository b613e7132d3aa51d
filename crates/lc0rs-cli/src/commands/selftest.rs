//! `lc0rs selftest`: a backend against the `cpu` oracle on random legal positions, per batch
//! size, and optionally layer by layer to find where an error starts.

use lc0rs::backend::oracle::{Errors, compare, encode_all, evaluate_in_batches, random_histories};
use lc0rs::backend::{self, Backend};
use lc0rs::chess::EncodedPosition;

use super::{CommandError, NetChoice, require};

/// The options of the backend under test that the oracle must share so that both evaluate
/// the same thing: the policy and value head and the moves-left setting.
const SHARED_OPTION_KEYS: [&str; 3] = ["policy_head=", "value_head=", "mlh="];

/// Positions whose layer outputs `--layers` compares.
const LAYER_POSITIONS: usize = 64;

/// Batch size the oracle evaluates in.
const ORACLE_BATCH: usize = 64;

/// What `selftest` checks.
#[derive(Debug, Clone)]
pub struct SelftestConfig {
    /// Positions to compare (raised to the largest batch size).
    pub positions: usize,
    /// Batch sizes to evaluate the backend under test at.
    pub batches: Vec<usize>,
    /// Seed of the random games.
    pub seed: u64,
    /// One JSON object per batch size instead of text.
    pub json: bool,
    /// Also compare the residual stream after the embedding and each encoder layer.
    pub layers: bool,
}

/// Runs the selftest and prints one line per batch size; fails if any batch size fails.
pub fn selftest(net: &NetChoice, config: &SelftestConfig) -> Result<(), CommandError> {
    require(
        !config.batches.is_empty() && config.batches.iter().all(|&b| b > 0),
        || "--batch needs positive sizes".to_owned(),
    )?;
    let network = net.network()?;
    let largest = config.batches.iter().copied().max().unwrap_or(1);
    let count = config.positions.max(largest);
    let backend =
        backend::create_backend(&net.backend_name(), network.clone(), &net.backend_options)?;
    let oracle = backend::create_backend("cpu", network, &oracle_options(&net.backend_options))?;
    let histories = random_histories(count, config.seed);
    let encoded = encode_all(&histories, backend.as_ref());
    eprintln!(
        "selftest: {} vs cpu on {count} random positions",
        net.backend_name()
    );
    let want = evaluate_in_batches(oracle.as_ref(), &encoded, ORACLE_BATCH)?;
    let mut failed = Vec::new();
    for &batch in &config.batches {
        let got = evaluate_in_batches(backend.as_ref(), &encoded, batch)?;
        let errors = compare(&histories, &encoded, &got, &want, batch);
        print_batch(&errors, config.json);
        if !errors.passed() {
            failed.push(batch);
        }
    }
    if config.layers {
        compare_layers(backend.as_ref(), oracle.as_ref(), &encoded)?;
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CommandError::SelftestFailed(failed))
    }
}

/// The oracle's options: those of the backend under test that choose what is evaluated.
pub fn oracle_options(backend_options: &str) -> String {
    backend_options
        .split(',')
        .map(str::trim)
        .filter(|o| SHARED_OPTION_KEYS.iter().any(|k| o.starts_with(k)))
        .collect::<Vec<_>>()
        .join(",")
}

fn print_batch(e: &Errors, json: bool) {
    let verdict = if e.passed() { "PASS" } else { "FAIL" };
    if json {
        println!("{}", serde_json::json!({"result": verdict, "errors": e}));
    } else {
        println!(
            "batch {:>4}: max|dP| {:.2e} mean|dP| {:.2e} logits rel-L2 {:.2e} |dQ| {:.2e} |dD| {:.2e} |dM| {:.2e} (limit ratio {:.2}) {verdict}",
            e.batch,
            e.max_probability,
            e.mean_probability,
            e.max_logits_relative_l2,
            e.max_q,
            e.max_d,
            e.max_m,
            e.m_ratio
        );
    }
}

/// Prints how far the backend's residual stream is from the oracle's after the embedding and
/// after each encoder layer.
fn compare_layers(
    backend: &dyn Backend,
    oracle: &dyn Backend,
    encoded: &[EncodedPosition],
) -> Result<(), CommandError> {
    let planes: Vec<_> = encoded
        .iter()
        .take(LAYER_POSITIONS)
        .map(|e| e.planes)
        .collect();
    let got = backend
        .layer_outputs(&planes)?
        .ok_or(CommandError::NoLayerOutputs {
            who: "this backend",
        })?;
    let want = oracle
        .layer_outputs(&planes)?
        .ok_or(CommandError::NoLayerOutputs {
            who: "the cpu oracle",
        })?;
    for error in layer_errors(&got, &want) {
        println!(
            "{:<12} max|d| {:.3e}  rel-L2 {:.3e}",
            error.layer, error.max_abs, error.relative_l2
        );
    }
    Ok(())
}

/// How far one layer's output is from the oracle's.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerError {
    /// `embedding` or `encoder N`.
    pub layer: String,
    /// The largest absolute difference.
    pub max_abs: f32,
    /// ‖got − want‖₂ / ‖want‖₂.
    pub relative_l2: f64,
}

/// Per layer (the embedding, then each encoder), the error of `got` against `want`.
pub fn layer_errors(got: &[Vec<f32>], want: &[Vec<f32>]) -> Vec<LayerError> {
    got.iter()
        .zip(want)
        .enumerate()
        .map(|(i, (g, w))| {
            let max_abs = g
                .iter()
                .zip(w)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            let diff: f64 = g.iter().zip(w).map(|(a, b)| f64::from(a - b).powi(2)).sum();
            let norm: f64 = w.iter().map(|b| f64::from(*b).powi(2)).sum();
            LayerError {
                layer: layer_name(i),
                max_abs,
                relative_l2: (diff / norm.max(1e-30)).sqrt(),
            }
        })
        .collect()
}

fn layer_name(index: usize) -> String {
    match index {
        0 => "embedding".to_owned(),
        i => format!("encoder {}", i - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oracle_takes_only_the_options_that_choose_what_is_evaluated() {
        assert_eq!(
            oracle_options("threads=2, policy_head=optimistic,gemm=lt,mlh=false,value_head=q"),
            "policy_head=optimistic,mlh=false,value_head=q"
        );
        assert_eq!(oracle_options(""), "");
        assert_eq!(oracle_options("threads=4,max_batch=8"), "");
    }

    #[test]
    fn layer_errors_by_hand() {
        // Embedding: got (3, 4) vs want (3, 0): max 4, ‖(0, 4)‖ / ‖(3, 0)‖ = 4/3.
        // Encoder 0: identical → 0 and 0.
        let got = vec![vec![3.0, 4.0], vec![1.0, -2.0]];
        let want = vec![vec![3.0, 0.0], vec![1.0, -2.0]];
        let errors = layer_errors(&got, &want);
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].layer, "embedding");
        assert_eq!(errors[0].max_abs, 4.0);
        assert!((errors[0].relative_l2 - 4.0 / 3.0).abs() < 1e-12);
        assert_eq!(errors[1].layer, "encoder 0");
        assert_eq!(errors[1].max_abs, 0.0);
        assert_eq!(errors[1].relative_l2, 0.0);
    }
}
