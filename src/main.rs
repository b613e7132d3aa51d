//! The `lc0rs` command line.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use lc0rs::backend::{BACKEND_NAMES, DEFAULT_POLICY_TEMPERATURE, create_backend};
use lc0rs::chess::{HistoryFill, PositionHistory};
use lc0rs::evaluate::evaluate_positions;
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
    /// Evaluate positions: value, draw, moves left and the move probabilities.
    Eval {
        #[command(flatten)]
        net: NetArgs,
        /// `startpos [moves ...]` or `fen FEN [moves ...]`; repeat for several positions.
        #[arg(long = "position", required = true)]
        positions: Vec<String>,
        /// Policy softmax temperature.
        #[arg(long = "temp", default_value_t = DEFAULT_POLICY_TEMPERATURE)]
        temperature: f32,
        /// History fill when the game is shorter than 8 positions: no, fen_only, always.
        #[arg(long, default_value = "fen_only", value_parser = ["no", "fen_only", "always"])]
        history_fill: String,
        /// One JSON object per position instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// The network and backend flags, as lc0 names them.
#[derive(clap::Args)]
struct NetArgs {
    /// Weights file, `preset:NAME` or `bundled:NAME`; default: the bundled tiny net.
    #[arg(short = 'w', long = "weights")]
    weights: Option<String>,
    /// Backend name.
    #[arg(short = 'b', long = "backend", default_value = "cpu", value_parser = clap::builder::PossibleValuesParser::new(BACKEND_NAMES))]
    backend: String,
    /// Backend options, `key=value,key2=value2`.
    #[arg(short = 'o', long = "backend-opts", default_value = "")]
    backend_opts: String,
}

impl NetArgs {
    fn create_backend(&self) -> Result<Box<dyn lc0rs::backend::Backend>> {
        let source = NetSource::parse(self.weights.as_deref())?;
        let name = source.display_name();
        let (network, _) = source
            .load(
                &LoadOptions::default(),
                &mut byte_progress(format!("generating {name}")),
            )
            .with_context(|| format!("loading {name}"))?;
        Ok(create_backend(&self.backend, network, &self.backend_opts)?)
    }
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // The cause chain, without a backtrace: these are user-facing errors.
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
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
        Command::Eval {
            net,
            positions,
            temperature,
            history_fill,
            json,
        } => {
            let fill = HistoryFill::from_name(&history_fill).expect("clap checked the name");
            eval(&net, &positions, temperature, fill, json)
        }
    }
}

fn eval(
    net: &NetArgs,
    specs: &[String],
    temperature: f32,
    fill: HistoryFill,
    json: bool,
) -> Result<()> {
    anyhow::ensure!(
        temperature > 0.0 && temperature.is_finite(),
        "--temp must be a positive number, not {temperature}"
    );
    let histories = specs
        .iter()
        .map(|spec| PositionHistory::from_spec(spec))
        .collect::<Result<Vec<_>, _>>()?;
    let backend = net.create_backend()?;
    let results = evaluate_positions(backend.as_ref(), &histories, fill, temperature)?;
    for (spec, r) in specs.iter().zip(&results) {
        if json {
            let policy: serde_json::Map<String, serde_json::Value> = r
                .policy
                .iter()
                .map(|(m, p)| (m.clone(), serde_json::json!(p)))
                .collect();
            let object = serde_json::json!({
                "position": spec, "q": r.q, "d": r.d, "m": r.m, "wdl": r.wdl, "policy": policy,
            });
            println!("{object}");
        } else {
            let top: Vec<String> = r
                .policy
                .iter()
                .take(5)
                .map(|(m, p)| format!("{m} {:.1}%", p * 100.0))
                .collect();
            println!(
                "{spec}: q {:+.4} d {:.4} m {:.1} wdl {:.3}/{:.3}/{:.3} | {}",
                r.q,
                r.d,
                r.m,
                r.wdl[0],
                r.wdl[1],
                r.wdl[2],
                top.join(", ")
            );
        }
    }
    Ok(())
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
