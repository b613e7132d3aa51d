//! The `lc0rs` command line.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use lc0rs::backend::{BACKEND_NAMES, DEFAULT_POLICY_TEMPERATURE};
use lc0rs::chess::HistoryFill;
use lc0rs::netgen::all_preset_names;
use lc0rs::weights::codec::LayerEncoding;

use lc0rs_cli::commands::devices::Vendor;
use lc0rs_cli::commands::selftest::SelftestConfig;
use lc0rs_cli::commands::{self, NetChoice, ProfileOutputs};

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
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(all_preset_names()))]
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
        /// Encoder layers (residual blocks for a tower preset) instead of the preset's number,
        /// at most 64 (the largest lc0 nets have 40 blocks; more would only exhaust memory).
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
        layers: Option<u16>,
    },
    /// Play chess over UCI (for GUIs and tools): MCTS on the chosen backend.
    Uci {
        #[command(flatten)]
        net: NetArgs,
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
    /// Check a backend against the cpu oracle on random legal positions.
    Selftest {
        #[command(flatten)]
        net: NetArgs,
        /// Positions to compare (at least the largest batch size).
        #[arg(long, default_value_t = 256)]
        positions: usize,
        /// Batch sizes, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = [1usize, 7, 64, 256])]
        batch: Vec<usize>,
        /// Seed of the random games.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print one JSON object per batch size.
        #[arg(long)]
        json: bool,
        /// Also compare the residual stream after the embedding and each encoder layer (on
        /// the first 64 positions), to find where an error starts.
        #[arg(long)]
        layers: bool,
    },
    /// lc0's backend benchmark: positions per second at each batch size, as CSV.
    Backendbench {
        #[command(flatten)]
        net: NetArgs,
        /// Batches per size.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=999_999_999))]
        batches: u64,
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
        start_batch_size: u64,
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1024))]
        max_batch_size: u64,
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
        batch_step: u64,
        /// Threads evaluating batches concurrently.
        #[arg(short = 't', long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=128))]
        threads: u64,
        /// The position to evaluate (FEN); default the start position.
        #[arg(long)]
        fen: Option<String>,
        /// Print the CSV header only once.
        #[arg(long)]
        header_only_once: bool,
        /// Time every operation and print each size's plan (which kernel each operation runs
        /// on) and where the time goes, by operation, layer and kernel (to stderr): on NVIDIA from CUPTI kernel timestamps of graph replays, else with
        /// device events around each operation (cpu: the host clock).
        #[arg(long)]
        profile: bool,
        /// Write a Chrome/Perfetto trace of the profiled passes (implies profiling).
        #[arg(long, value_name = "FILE.json")]
        trace: Option<PathBuf>,
        /// Write the time breakdown as an SVG bar chart (implies profiling).
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
        /// Write the operations on the device's roofline (FLOPs per byte against TFLOP/s) as an
        /// SVG chart (implies profiling; needs the device's peak figures).
        #[arg(long, value_name = "FILE.svg")]
        roofline: Option<PathBuf>,
        /// Run the benchmark once per option set and print positions/s side by side, e.g.
        /// `gemm=blas,gemm=lt` (join several keys of one set with `+`).
        #[arg(long, value_name = "SETS")]
        compare: Option<String>,
    },
    /// List the GPU runtimes found and their GPUs, or why there are none.
    Devices,
    /// Compile every kernel with the vendor's run-time compiler (needs no GPU).
    CompileKernels {
        #[arg(long, value_parser = ["cuda", "hip"], required_unless_present = "list_files")]
        vendor: Option<String>,
        /// Target architecture, e.g. sm_80, sm_90 (cuda) or gfx90a, gfx1030, gfx1100 (hip).
        #[arg(long, required_unless_present = "list_files")]
        arch: Option<String>,
        /// Also write hipRTC's code object here (hip only), e.g. for a disassembler.
        #[arg(long)]
        code_object: Option<std::path::PathBuf>,
        /// Print the kernel files instead, in the order they form one source after
        /// hip/prelude.h (what CI's hipcc check compiles), and compile nothing.
        #[arg(long, conflicts_with_all = ["vendor", "arch", "code_object"])]
        list_files: bool,
    },
    /// Time the attention implementations (naive, unfused, portable, mma, matrix) at lc0's shapes, each
    /// checked against an f64 reference first; CSV.
    Attnbench {
        /// GPU backend: cuda-fp16, rocm-fp16 or hip-emu.
        #[arg(short, long, default_value = "cuda-fp16")]
        backend: String,
        /// GPU ordinal.
        #[arg(long, default_value_t = 0)]
        gpu: usize,
        /// Head counts, comma-separated (T82 has 24, BT4 32).
        #[arg(long, value_delimiter = ',', default_values_t = [24usize, 32])]
        heads: Vec<usize>,
        /// Head depths, comma-separated (16, 32 or 64).
        #[arg(long, value_delimiter = ',', default_values_t = [32usize])]
        depth: Vec<usize>,
        /// Batch sizes (positions), comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = [1usize, 8, 64, 256, 1024])]
        batches: Vec<usize>,
        /// The smolgen bias: both, yes or no.
        #[arg(long, default_value = "both", value_parser = ["both", "yes", "no"])]
        bias: String,
        /// Implementations, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = ["naive".to_owned(), "unfused".to_owned(), "portable".to_owned(), "mma".to_owned()])]
        kernels: Vec<String>,
        /// Calls before timing.
        #[arg(long, default_value_t = 5)]
        warmup: usize,
        /// Calls per timed run.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=100_000))]
        iterations: u64,
        /// Timed runs; the median is printed.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
        repeats: u64,
    },
}

/// The network and backend flags, as lc0 names them.
#[derive(clap::Args)]
struct NetArgs {
    /// Weights file, `preset:NAME` or `bundled:NAME`; default: the bundled tiny net.
    #[arg(short = 'w', long = "weights")]
    weights: Option<String>,
    /// Backend name; default: the best one present (cuda-fp16 with a usable NVIDIA GPU, else
    /// rocm-fp16 with an AMD GPU, else cpu).
    #[arg(short = 'b', long = "backend", value_parser = clap::builder::PossibleValuesParser::new(BACKEND_NAMES))]
    backend: Option<String>,
    /// Backend options, `key=value,key2=value2`.
    #[arg(short = 'o', long = "backend-opts", default_value = "")]
    backend_opts: String,
}

impl NetArgs {
    fn choice(&self) -> NetChoice {
        NetChoice {
            weights: self.weights.clone(),
            backend: self.backend.clone(),
            backend_options: self.backend_opts.clone(),
        }
    }
}

fn main() -> std::process::ExitCode {
    // Timing spans and events go to stderr when asked for, e.g. RUST_LOG=lc0rs=trace.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .init();
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
        Command::Info { file, json } => commands::info(file.as_deref(), json)?,
        Command::GenNet {
            preset,
            seed,
            output,
            encoding,
            layers,
        } => {
            let encoding = LayerEncoding::from_name(&encoding)
                .with_context(|| format!("unknown encoding {encoding:?}"))?;
            commands::gen_net(&preset, seed, &output, encoding, layers.map(usize::from))?
        }
        Command::Selftest {
            net,
            positions,
            batch,
            seed,
            json,
            layers,
        } => {
            let config = SelftestConfig {
                positions,
                batches: batch,
                seed,
                json,
                layers,
            };
            commands::selftest(&net.choice(), &config)?
        }
        Command::Backendbench {
            net,
            batches,
            start_batch_size,
            max_batch_size,
            batch_step,
            threads,
            fen,
            header_only_once,
            profile,
            trace,
            plot,
            roofline,
            compare,
        } => {
            let config = lc0rs::backend::bench::BenchConfig {
                batches: batches as usize,
                start_batch_size: start_batch_size as usize,
                max_batch_size: max_batch_size as usize,
                batch_step: batch_step as usize,
                threads: threads as usize,
            };
            let outputs = ProfileOutputs {
                table: profile,
                trace,
                plot,
                roofline,
            };
            let (net, fen) = (net.choice(), fen.as_deref());
            match compare {
                Some(sets) => commands::compare_option_sets(&net, &config, fen, &sets)?,
                None => commands::backendbench(&net, &config, fen, header_only_once, &outputs)?,
            }
        }
        Command::Uci { net } => {
            let config = lc0rs_engine::uci::EngineConfig {
                weights: net.weights.clone(),
                backend: net.choice().backend_name(),
                backend_options: net.backend_opts.clone(),
            };
            let out: lc0rs_engine::uci::Output =
                std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
            lc0rs_engine::uci::run(std::io::stdin().lock(), out, config);
        }
        Command::Devices => commands::devices(),
        Command::Attnbench {
            backend,
            gpu,
            heads,
            depth,
            batches,
            bias,
            kernels,
            warmup,
            iterations,
            repeats,
        } => {
            let implementations = kernels
                .iter()
                .map(|k| {
                    lc0rs::gpu::attention_bench::AttentionImpl::from_name(k).with_context(|| {
                        format!("unknown attention kernel {k:?} (naive, unfused, portable, mma)")
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let smolgen = match bias.as_str() {
                "yes" => vec![true],
                "no" => vec![false],
                _ => vec![false, true],
            };
            commands::attnbench(&commands::AttnBenchConfig {
                backend,
                gpu,
                heads,
                depths: depth,
                batches,
                smolgen,
                implementations,
                warmup,
                iterations: iterations as usize,
                repeats: repeats as usize,
            })?
        }
        Command::CompileKernels {
            vendor,
            arch,
            code_object,
            list_files,
        } => {
            if list_files {
                commands::list_kernel_files();
                return Ok(());
            }
            let vendor = match vendor.as_deref() {
                Some("cuda") => Vendor::Cuda,
                Some("hip") => Vendor::Hip(code_object),
                other => anyhow::bail!("unknown vendor {other:?}"),
            };
            commands::compile_kernels(vendor, arch.as_deref().unwrap_or_default())?
        }
        Command::Eval {
            net,
            positions,
            temperature,
            history_fill,
            json,
        } => {
            let fill = HistoryFill::from_name(&history_fill)
                .with_context(|| format!("unknown history fill {history_fill:?}"))?;
            commands::eval(&net.choice(), &positions, temperature, fill, json)?
        }
    }
    Ok(())
}
