//! The `rocm-fp16` backend against the CPU oracle. They need an AMD GPU with ROCm (rocBLAS;
//! hipBLASLt for `gemm=lt` from ROCm 6), so they are `#[ignore]`d (reported as ignored, never as
//! passed, elsewhere) and run on such a machine with `cargo test --test gpu_rocm -- --ignored`.
//! No AMD GPU has run them yet (see README).

use lc0rs::backend::create_backend;
use lc0rs::netsource::NetSource;
use lc0rs::selftest::{compare, encode_all, evaluate_in_batches, random_histories};
use lc0rs::weights::format::Activation;
use lc0rs::weights::{LoadOptions, Network};

fn bundled(name: &str) -> Network {
    NetSource::parse(Some(name))
        .unwrap()
        .load(&LoadOptions::default(), &mut |_, _| {})
        .unwrap()
        .0
}

/// Every option set on `network`, each batch size twice (the eager pass, then the graph).
fn check_against_cpu(label: &str, network: &Network, option_sets: &[&str]) {
    let oracle = create_backend("cpu", network.clone(), "").unwrap();
    for options in option_sets {
        let backend = create_backend("rocm-fp16", network.clone(), options)
            .unwrap_or_else(|e| panic!("rocm-fp16 with {options:?}: {e}"));
        let histories = random_histories(100, 5);
        let encoded = encode_all(&histories, backend.as_ref());
        let want = evaluate_in_batches(oracle.as_ref(), &encoded, 64).unwrap();
        for batch in [1, 7, 64] {
            for run in 0..2 {
                let got = evaluate_in_batches(backend.as_ref(), &encoded, batch).unwrap();
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

#[test]
#[ignore = "needs an AMD GPU with ROCm (run with --ignored on one)"]
fn rocm_backend_matches_cpu_on_bundled_nets() {
    for net in ["bundled:tiny", "bundled:tiny-dense"] {
        check_against_cpu(
            net,
            &bundled(net),
            &["", "gemm=blas", "graph=false", "gemm=blas,max_batch=64"],
        );
    }
}

/// SiLU dense layers: hipBLASLt's SWISH_BIAS epilogue on ROCm 7 where the GPU has kernels for
/// it, else the bias epilogue plus our kernel.
#[test]
#[ignore = "needs an AMD GPU with ROCm (run with --ignored on one)"]
fn rocm_swish_variant_matches_cpu() {
    use lc0rs::netgen::{generate, preset};
    let mut arch = preset("tiny").unwrap();
    arch.format.default_activation = Activation::Swish;
    arch.format.ffn_activation = Activation::Swish;
    check_against_cpu("swish", &generate(&arch, 23), &["", "gemm=blas"]);
}
