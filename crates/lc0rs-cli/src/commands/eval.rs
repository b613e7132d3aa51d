//! `lc0rs eval`: value, draw, moves left and move probabilities of positions.

use lc0rs::chess::{HistoryFill, PositionHistory};
use lc0rs::evaluate::{PositionEval, evaluate_positions};

use super::{CommandError, NetChoice, require};

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

#[cfg(test)]
mod tests {
    use super::*;

    fn evaluation() -> PositionEval {
        PositionEval {
            q: 0.25,
            d: 0.5,
            m: 42.0,
            wdl: [0.375, 0.5, 0.125],
            policy: ["e2e4", "d2d4", "g1f3", "c2c4", "e2e3", "b1c3"]
                .iter()
                .zip([0.4, 0.3, 0.1, 0.1, 0.06, 0.04])
                .map(|(m, p)| (m.to_string(), p))
                .collect(),
        }
    }

    #[test]
    fn a_text_line_shows_the_five_likeliest_moves() {
        assert_eq!(
            text_line("startpos", &evaluation()),
            "startpos: q +0.2500 d 0.5000 m 42.0 wdl 0.375/0.500/0.125 | \
             e2e4 40.0%, d2d4 30.0%, g1f3 10.0%, c2c4 10.0%, e2e3 6.0%"
        );
    }

    #[test]
    fn a_json_line_holds_every_move() {
        let object = json_line("startpos", &evaluation());
        assert_eq!(object["position"], "startpos");
        assert_eq!(object["wdl"], serde_json::json!([0.375, 0.5, 0.125]));
        assert_eq!(object["policy"].as_object().unwrap().len(), 6);
        assert_eq!(object["policy"]["b1c3"], serde_json::json!(0.04f32));
    }
}
