//! The kernels and the `rocm-fp16` executor on the emulated AMD GPU (`hip-emu`), at wave64 and
//! wave32, against f64 references and the cpu oracle. They need g++, TBB and HIP-CPU; where one
//! is missing they print why and return, except with `LC0RS_REQUIRE_HIP_EMU` set (CI), where a
//! missing dependency fails them.

// The emulator builds its kernels with g++ into a Linux shared library: no Windows build of it.
#![cfg(target_os = "linux")]

mod common;

use common::gpu::{
    bundled, check_against_cpu, check_backend_against_cpu_on,
    check_first_passes_right_after_creation, check_picked_against_cpu,
};
use common::tower::gpu_test_towers;
use common::{conv_kernels, kernels, matrix, winograd_kernels};
use lc0rs::gpu::GpuDevice;
use lc0rs::gpu::emu::library::BuildConfig;
use lc0rs::gpu::emu::{EmuDevice, LtRelease};
use lc0rs::gpu::kernels::AttentionFamily;
use lc0rs::weights::format::Activation;

const WAVES: [u32; 2] = [64, 32];

/// One of the per-kernel checks of common::kernels.
type KernelCheck = dyn Fn(&dyn GpuDevice);

/// The emulated GPU of wave size `wave`, or `None` (after saying why) where the emulator's
/// dependencies are missing and not required.
fn emulated(wave: u32) -> Option<EmuDevice> {
    let opened =
        BuildConfig::new(wave).and_then(|config| EmuDevice::new(&config, LtRelease::Rocm7));
    match opened {
        Ok(device) => Some(device),
        Err(e) if std::env::var_os("LC0RS_REQUIRE_HIP_EMU").is_none() => {
            eprintln!("skipped: the hip-emu emulator is not usable here: {e}");
            None
        }
        Err(e) => panic!("hip-emu wave{wave} required (LC0RS_REQUIRE_HIP_EMU): {e}"),
    }
}

/// Runs `check` on the emulated GPU at each wave size.
fn at_each_wave(check: impl Fn(&dyn GpuDevice)) {
    for wave in WAVES {
        let Some(device) = emulated(wave) else { return };
        assert_eq!(device.info().warp_size, wave);
        eprintln!("wave{wave}:");
        check(&device);
    }
}

#[test]
fn attention_kernels_match_f64() {
    at_each_wave(|device| kernels::check_attention(device, AttentionFamily::Portable));
}

/// Every emulated matrix instruction against a plain product (wave32: both WMMA forms; wave64:
/// MFMA), and a WMMA whose wave halves disagree is not taken for a product.
#[test]
fn matrix_instructions_match_a_plain_product() {
    let forms: [(u32, &[&matrix::Layout]); 2] = [
        (32, &[&matrix::WMMA_GFX11, &matrix::WMMA_GFX12]),
        (64, &[&matrix::MFMA_16]),
    ];
    for (wave, layouts) in forms {
        let Some(device) = emulated(wave) else { return };
        for layout in layouts {
            matrix::check_instruction(&device, layout);
        }
        if wave == 32 {
            matrix::check_wmma_gfx11_halves(&device);
        }
    }
}

/// The matrix-core attention (WMMA at wave32, MFMA at wave64) against f64, outputs poisoned.
#[test]
fn matrix_attention_matches_f64() {
    at_each_wave(|device| {
        assert!(device.has_kernel("attention_matrix_d32"));
        kernels::check_attention(device, AttentionFamily::MatrixCores);
    });
}

/// The same in RDNA4's WMMA layout (a wave32 build emulating gfx1201: a library build of its own).
#[test]
fn matrix_attention_in_the_gfx12_layout_matches_f64() {
    let Some(mut config) = BuildConfig::new(32).ok().filter(|_| emulated(32).is_some()) else {
        return;
    };
    config.gfx12 = true;
    let device = EmuDevice::new(&config, LtRelease::Rocm7).unwrap();
    assert!(device.info().arch.starts_with("gfx1201"));
    kernels::check_attention(&device, AttentionFamily::MatrixCores);
}

#[test]
fn attnbench_implementations_match_f64() {
    at_each_wave(|device| kernels::check_attnbench_implementations(device, false));
}

#[test]
fn layer_norm_kernel_matches_f64() {
    at_each_wave(kernels::check_layer_norm);
}

#[test]
fn warp_layer_norm_kernels_match_f64() {
    at_each_wave(kernels::check_warp_layer_norm);
}

#[test]
fn dense_rows_kernel_matches_f64() {
    at_each_wave(kernels::check_dense_rows);
}

#[test]
fn conv_gather_kernel_is_exact() {
    at_each_wave(conv_kernels::check_conv_gather);
}

#[test]
fn residual_kernels_match_f64() {
    at_each_wave(|device| {
        conv_kernels::check_bias_residual_act(device);
        conv_kernels::check_se_residual(device);
    });
}

#[test]
fn winograd_kernels_match_the_direct_convolution() {
    at_each_wave(|device| {
        winograd_kernels::check_winograd_convolutions(device);
        winograd_kernels::check_winograd_se(device);
    });
}

#[test]
fn policy_gather_kernel_is_exact() {
    at_each_wave(conv_kernels::check_policy_gather);
}

/// The `tiny-se` preset (SE blocks, mish, convolution policy, WDL, moves left) through the
/// whole executor, both GEMM paths, with and without graphs, both squeeze-excitation forms, at
/// both wave sizes.
#[test]
fn tiny_se_tower_matches_cpu() {
    use lc0rs::netgen::{generate_tower, tower_preset};
    if emulated(64).is_none() {
        return;
    }
    let network = generate_tower(&tower_preset("tiny-se").unwrap(), 5);
    check_backend_against_cpu_on(
        "hip-emu",
        "tiny-se",
        &network,
        &[
            "",
            "wave=32",
            "wave=32,gemm=blas,graph=false",
            "conv=gather",
            "conv=winograd4",
            "se_board=false",
            "wave=32,conv=winograd4,se_board=false",
        ],
        12,
        &[1, 7],
    );
}

/// Classical blocks (no SE), ReLU, the classical policy head and a scalar (tanh) value head
/// without moves left; then the attention policy head over an SE tower (its SELU embedding).
#[test]
fn classical_and_attention_policy_towers_match_cpu() {
    if emulated(64).is_none() {
        return;
    }
    for (label, model) in gpu_test_towers() {
        check_backend_against_cpu_on(
            "hip-emu",
            label,
            &model,
            &["", "wave=32,gemm=blas"],
            9,
            &[1, 9],
        );
    }
}

/// The real Maia 1900 net (`scripts/fetch-maia.sh`; SE blocks, ReLU, convolution policy, WDL)
/// at both wave sizes, where the file is present.
#[test]
fn maia_matches_cpu() {
    let path = std::env::var_os("LC0RS_MAIA_NET").map_or_else(
        || std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/maia/maia-1900.pb.gz"),
        std::path::PathBuf::from,
    );
    if emulated(64).is_none() || !path.is_file() {
        eprintln!("skipped: no emulator or no {}", path.display());
        return;
    }
    let options = lc0rs::weights::LoadOptions::default();
    let (model, _) = lc0rs::weights::load_model_file_with_info(&path, &options).unwrap();
    check_backend_against_cpu_on("hip-emu", "maia", &model, &["", "wave=32"], 8, &[1, 4]);
}

/// The whole executor on the bundled nets, both GEMM paths, with and without graphs, at both
/// wave sizes, with the matrix-core attention (the default: MFMA at wave64, WMMA at wave32) and
/// the portable one: 15 positions at batch 1 (the `dense_rows` path) and 7 (GEMMs), each twice (eager,
/// then the recorded graph).
#[test]
fn backend_matches_cpu_on_bundled_nets() {
    if emulated(64).is_none() {
        return;
    }
    for net in ["bundled:tiny", "bundled:tiny-dense"] {
        check_backend_against_cpu_on(
            "hip-emu",
            net,
            &bundled(net),
            &[
                "",
                "wave=32",
                "wave=32,gemm=blas,graph=false",
                "attention=portable",
                "wave=32,attention=portable",
            ],
            15,
            &[1, 7],
        );
    }
}

/// One backend over three emulated GPUs, each with memory of its own: under both policies
/// every position gets the cpu oracle's outputs, in the batch's order (a split batch's parts
/// joined back; whole calls dealt to GPUs given out of order).
#[test]
fn several_emulated_gpus_match_cpu() {
    if emulated(64).is_none() {
        return;
    }
    let net = "bundled:tiny";
    let options = [
        "gpus=all,emulated_gpus=3,split_min=2",
        "gpus=2,0,emulated_gpus=3,policy=rr,wave=32",
    ];
    check_backend_against_cpu_on("hip-emu", net, &bundled(net), &options, 13, &[13, 5]);
}

/// A search's call (each position's legal moves' logits only, copied out of the download
/// buffer) against the cpu oracle, on one emulated GPU and split over three.
#[test]
fn picked_policy_logits_match_cpu() {
    if emulated(64).is_none() {
        return;
    }
    let net = "bundled:tiny";
    let options = ["", "gpus=all,emulated_gpus=3,split_min=2"];
    check_picked_against_cpu("hip-emu", &bundled(net), &options, &[13, 40]);
}

/// A GPU that does not exist, one named twice and an empty list are refused, naming what is
/// wrong, before any GPU is opened (so this runs without the emulator too).
#[test]
fn impossible_gpu_lists_are_refused() {
    let net = "bundled:tiny";
    for (options, expected) in [
        (
            "gpus=0,3,emulated_gpus=2",
            "there is no GPU 3: this machine has 2 (GPUs 0 to 1)",
        ),
        ("gpus=1,1,emulated_gpus=2", "GPU 1 is named twice"),
        ("gpus=,emulated_gpus=2", "expected all or GPU numbers"),
        ("gpu=1,gpus=0,1", "not both"),
        ("gpus=all,emulated_gpus=0", "emulated_gpus"),
        ("gpus=0,1,policy=demux", "expected split or rr"),
    ] {
        let error = match lc0rs::backend::create_backend("hip-emu", bundled(net), options) {
            Ok(_) => panic!("{options}: accepted"),
            Err(e) => e.to_string(),
        };
        assert!(error.contains(expected), "{options}: {error}");
    }
}

/// A batch of 17 runs padded to the prepared size 18 (the extra position's input planes
/// empty): each position's outputs still match the cpu oracle, eager and from the graph.
#[test]
fn padded_batches_match_cpu() {
    if emulated(64).is_none() {
        return;
    }
    let net = "bundled:tiny";
    let options = ["", "wave=32,gemm=blas,graph=false"];
    check_backend_against_cpu_on("hip-emu", net, &bundled(net), &options, 17, &[17]);
}

/// Evaluation right after creation, from two threads on two lanes (docs/gpu-ordering.md: why
/// the weight upload cannot race the first pass).
#[test]
fn first_passes_right_after_creation_match_cpu() {
    if emulated(64).is_none() {
        return;
    }
    check_first_passes_right_after_creation("hip-emu", &bundled("bundled:tiny"), 2);
}

/// SiLU dense layers: hipBLASLt's SWISH_BIAS epilogue (ROCm 7), the bias epilogue plus our
/// kernel (ROCm 6), and both by kernel (BLAS).
#[test]
fn swish_variant_matches_cpu() {
    use lc0rs::netgen::{generate, preset};
    if emulated(64).is_none() {
        return;
    }
    let mut arch = preset("tiny").unwrap();
    arch.format.default_activation = Activation::Swish;
    arch.format.ffn_activation = Activation::Swish;
    let network = generate(&arch, 23);
    for options in ["lt_release=7", "lt_release=6,wave=32", "gemm=blas"] {
        check_against_cpu("hip-emu", &network, (options, ""), 11, 16);
    }
}

/// A net with ReLU (fused into the Lt epilogue), SELU, tanh and a policy width that is not a
/// multiple of 8.
#[test]
fn relu_scalar_variant_matches_cpu() {
    use lc0rs::netgen::{generate, preset};
    if emulated(64).is_none() {
        return;
    }
    let mut arch = preset("tiny").unwrap();
    arch.format.default_activation = Activation::Relu;
    arch.format.smolgen_activation = Activation::Tanh;
    arch.format.ffn_activation = Activation::Selu;
    arch.format.wdl = false;
    arch.format.moves_left = false;
    arch.gating = false;
    arch.policy_d = 36;
    let network = generate(&arch, 21);
    for options in ["", "wave=32,gemm=blas"] {
        check_against_cpu("hip-emu", &network, (options, ""), 9, 16);
    }
}

/// Timing is not emulated: the profile says so instead of inventing numbers.
#[test]
fn profiling_reports_timing_as_not_emulated() {
    if emulated(64).is_none() {
        return;
    }
    let backend =
        lc0rs::backend::create_backend("hip-emu", bundled("bundled:tiny"), "profile=true").unwrap();
    let planes: Vec<_> = lc0rs::backend::oracle::encode_all(
        &lc0rs::backend::oracle::random_histories(2, 1),
        backend.as_ref(),
    )
    .into_iter()
    .map(|e| e.planes)
    .collect();
    let e = backend.evaluate(&planes).unwrap_err().to_string();
    assert!(e.contains("not emulated"), "{e}");
}

/// The control: a build whose shuffles return the lane's own value must fail the kernel checks
/// that reduce across lanes (run by hand: it costs a build of its own).
#[test]
#[ignore = "a control build of its own (about 20 s of g++); run with --ignored"]
fn a_broken_shuffle_fails_the_kernel_checks() {
    let mut config = BuildConfig::new(64).unwrap();
    config.broken_shuffle = true;
    let device = EmuDevice::new(&config, LtRelease::Rocm7).unwrap();
    let checks: [(&str, &KernelCheck); 6] = [
        ("attention", &|d| {
            kernels::check_attention(d, AttentionFamily::Portable)
        }),
        ("layer_norm", &kernels::check_layer_norm),
        ("warp_layer_norm", &kernels::check_warp_layer_norm),
        ("dense_rows", &kernels::check_dense_rows),
        ("se_residual", &conv_kernels::check_se_residual),
        ("se_gates_of_means", &winograd_kernels::check_winograd_se),
    ];
    for (name, check) in checks {
        let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&device)));
        eprintln!(
            "{name} with broken shuffles: {}",
            if failed.is_err() {
                "FAILED (as it must)"
            } else {
                "passed"
            }
        );
        assert!(failed.is_err(), "{name} passed with broken shuffles");
    }
}

/// Bad options are refused by name before anything is built.
#[test]
fn bad_wave_and_release_options_are_named() {
    for (options, key) in [("wave=16", "wave"), ("lt_release=5", "lt_release")] {
        let e = lc0rs::backend::create_backend("hip-emu", bundled("bundled:tiny"), options)
            .err()
            .unwrap_or_else(|| panic!("{options} accepted"))
            .to_string();
        assert!(e.contains(key) && e.contains("expected"), "{options}: {e}");
    }
}
