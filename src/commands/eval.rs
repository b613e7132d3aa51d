//! `lc0rs eval`: value, draw, moves left and move probabilities of positions.

use super::{CommandError, NetChoice, require};
use crate::chess::{HistoryFill, PositionHistory};
use crate::evaluate::{PositionEval, evaluate_positions};

/// Evaluates each position spec (`startpos [moves …]`, `fen FEN [moves …]`) and prints one
/// line, or one JSON object, per position.
pub fn eval(
    net: &NetChoice,
    specs: &[String],
    temperature: f32,
    fill: HistoryFill,
    json: bool,
) -> Result<(), CommandError> {
    require(temperature > 0.0 && temperature.is_finite(), || {
        format!("--temp must be a positive number, not {temperature}")
    })?;
    let histories = specs
        .iter()
        .map(|spec| PositionHistory::from_spec(spec))
        .collect::<Result<Vec<_>, _>>()?;
    let backend = net.create_backend_with("")?;
    let results = evaluate_positions(backend.as_ref(), &histories, fill, temperature)?;
    for (spec, result) in specs.iter().zip(&results) {
        if json {
            println!("{}", json_line(spec, result));
        } else {
            println!("{}", text_line(spec, result));
        }
    }
    Ok(())
}

/// One position as a JSON object: Q, D, M, WDL and every legal move's probability.
fn json_line(spec: &str, r: &PositionEval) -> serde_json::Value {
    let policy: serde_json::Map<String, serde_json::Value> = r
        .policy
        .iter()
        .map(|(m, p)| (m.clone(), serde_json::json!(p)))
        .collect();
    serde_json::json!({
        "position": spec, "q": r.q, "d": r.d, "m": r.m, "wdl": r.wdl, "policy": policy,
    })
}

/// One position as a line of text: Q, D, M, WDL and the five likeliest moves.
fn text_line(spec: &str, r: &PositionEval) -> String {
    let top: Vec<String> = r
        .policy
        .iter()
        .take(5)
        .map(|(m, p)| format!("{m} {:.1}%", p * 100.0))
        .collect();
    format!(
        "{spec}: q {:+.4} d {:.4} m {:.1} wdl {:.3}/{:.3}/{:.3} | {}",
        r.q,
        r.d,
        r.m,
        r.wdl[0],
        r.wdl[1],
        r.wdl[2],
        top.join(", ")
    )
}
