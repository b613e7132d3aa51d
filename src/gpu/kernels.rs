//! The kernel sources in `hip/` and what the Rust side needs to call them.

use crate::weights::format::Activation;

/// The portability prelude followed by every kernel, as one translation unit.
pub fn source() -> String {
    [
        include_str!("../../hip/prelude.h"),
        include_str!("../../hip/kernels.hip"),
    ]
    .join("\n")
}

/// Every kernel entry point in `hip/kernels.hip`.
pub const KERNEL_NAMES: [&str; 10] = [
    "expand_tokens",
    "pe_dense_input",
    "bias_activation",
    "input_gating",
    "layer_norm",
    "attention_d16",
    "attention_d32",
    "attention_d64",
    "policy_finish",
    "value_finish",
];

/// Threads per block of the attention kernels (`ATTENTION_THREADS` in hip/kernels.hip).
pub const ATTENTION_THREADS: u32 = 128;

/// The attention kernel for a head depth, if one exists.
pub fn attention_kernel(depth: usize) -> Option<&'static str> {
    match depth {
        16 => Some("attention_d16"),
        32 => Some("attention_d32"),
        64 => Some("attention_d64"),
        _ => None,
    }
}

/// The activation code of `hip/prelude.h`.
pub fn activation_code(a: Activation) -> i32 {
    match a {
        Activation::Identity => 0,
        Activation::Relu => 1,
        Activation::Relu2 => 2,
        Activation::Mish => 3,
        Activation::Swish => 4,
        Activation::Selu => 5,
        Activation::Tanh => 6,
        Activation::Sigmoid => 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_kernel_is_in_the_source() {
        let src = source();
        for name in KERNEL_NAMES {
            assert!(src.contains(&format!("KERNEL void {name}(")), "{name}");
        }
        assert_eq!(src.matches("KERNEL void ").count(), KERNEL_NAMES.len());
    }

    #[test]
    fn attention_threads_match_the_kernel() {
        assert!(source().contains(&format!("#define ATTENTION_THREADS {ATTENTION_THREADS}\n")));
    }

    #[test]
    fn activation_codes_match_the_prelude() {
        let src = source();
        for (a, name) in [
            (Activation::Identity, "IDENTITY"),
            (Activation::Relu, "RELU"),
            (Activation::Relu2, "RELU2"),
            (Activation::Mish, "MISH"),
            (Activation::Swish, "SWISH"),
            (Activation::Selu, "SELU"),
            (Activation::Tanh, "TANH"),
            (Activation::Sigmoid, "SIGMOID"),
        ] {
            assert!(
                src.contains(&format!("#define ACT_{name} {}\n", activation_code(a))),
                "{name}"
            );
        }
    }
}
