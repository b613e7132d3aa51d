//! `lc0rs info` and `lc0rs gen-net`: describe a network, write one.

use std::path::Path;

use lc0rs::netsource::write_preset;
use lc0rs::weights::Model;
use lc0rs::weights::codec::LayerEncoding;
use lc0rs::weights::summary::Summary;
use lc0rs::weights::tower_summary::TowerSummary;

use super::{CommandError, byte_progress, load_network};

/// Prints the description of the network `spec` names, as text or one JSON object.
pub fn info(spec: Option<&str>, json: bool) -> Result<(), CommandError> {
    let loaded = load_network(spec)?;
    let (json_text, text) = match &loaded.model {
        Model::Attention(network) => {
            let summary = Summary::new(&loaded.name, network, &loaded.file_info);
            (serde_json::to_string_pretty(&summary)?, summary.to_text())
        }
        Model::Residual(tower) => {
            let summary = TowerSummary::new(&loaded.name, tower, &loaded.file_info);
            (serde_json::to_string_pretty(&summary)?, summary.to_text())
        }
    };
    println!("{}", if json { json_text } else { text });
    Ok(())
}

/// Writes the preset `preset` with seeded random weights to `output`.
pub fn gen_net(
    preset: &str,
    seed: u64,
    output: &Path,
    encoding: LayerEncoding,
    layers: Option<usize>,
) -> Result<(), CommandError> {
    let mut progress = byte_progress(format!("writing {}", output.display()));
    write_preset(preset, seed, encoding, layers, output, &mut progress)?;
    eprintln!(
        "wrote {} ({preset}, seed {seed}, {})",
        output.display(),
        encoding.name()
    );
    Ok(())
}
