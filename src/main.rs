//! The `lc0rs` command line.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use lc0rs::netgen::PRESET_NAMES;
use lc0rs::netsource::{NetSource, write_preset};
use lc0rs::weights::LoadOptions;
use lc0rs::weights::codec::LayerEncoding;
use lc0rs::weights::summary::Summary;

#[derive(Parser)]
#[command(
    name = "lc0rs",
    version,
    about = "A Rust backend for Leela Chess Zero transformer networks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Describe a network: architecture, formats, parameters and FLOPs per position.
    Info {
        /// A weights file (.pb.gz or .pb), `preset:NAME` or `bundled:NAME`; default: the bundled
        /// tiny net.
        file: Option<String>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write a valid lc0 network with deterministic random weights.
    GenNet {
        /// Architecture to generate.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(PRESET_NAMES))]
        preset: String,
        /// Random seed; the same seed gives the same weights.
        #[arg(long, default_value_t = lc0rs::netsource::PRESET_SEED)]
        seed: u64,
        /// Output file; `.pb` writes plain protobuf, anything else gzip.
        #[arg(short, long)]
        output: PathBuf,
        /// Layer encoding (float16, bfloat16 and float32 files need lc0 v0.33 or lc0rs).
        #[arg(long, default_value = "linear16", value_parser = clap::builder::PossibleValuesParser::new(LayerEncoding::ALL.map(LayerEncoding::name)))]
        encoding: String,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Info { file, json } => info(file.as_deref(), json),
        Command::GenNet {
            preset,
            seed,
            output,
            encoding,
        } => {
            let encoding = LayerEncoding::from_name(&encoding).expect("clap checked the name");
            gen_net(&preset, seed, &output, encoding)
        }
    }
}

/// A progress bar on stderr for writing a network; hidden when stderr is not a terminal.
fn byte_progress(message: String) -> impl FnMut(u64, u64) {
    let bar = ProgressBar::new(0).with_message(message);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {bytes}/{total_bytes} ({eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    move |done, total| {
        bar.set_length(total);
        bar.set_position(done);
        if done >= total {
            bar.finish_and_clear();
        }
    }
}

fn info(spec: Option<&str>, json: bool) -> Result<()> {
    let source = NetSource::parse(spec)?;
    let name = source.display_name();
    let (network, file_info) = source
        .load(
            &LoadOptions::default(),
            &mut byte_progress(format!("generating {name}")),
        )
        .with_context(|| format!("loading {name}"))?;
    let summary = Summary::new(&name, &network, &file_info);
    if json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!("{}", summary.to_text());
    }
    Ok(())
}

fn gen_net(
    preset: &str,
    seed: u64,
    output: &std::path::Path,
    encoding: LayerEncoding,
) -> Result<()> {
    let mut progress = byte_progress(format!("writing {}", output.display()));
    write_preset(preset, seed, encoding, output, &mut progress)?;
    eprintln!(
        "wrote {} ({preset}, seed {seed}, {})",
        output.display(),
        encoding.name()
    );
    Ok(())
}
