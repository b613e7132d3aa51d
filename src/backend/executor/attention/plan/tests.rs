//! The body plan's decisions for T82 and BT4 against what the options' documented defaults
//! (`norm_dense=1`, `dense_mma=1`, `pdl=8`, `attention=mma`) and the kernels' limits say.

use std::sync::Arc;

use super::*;
use crate::backend::executor::plan::tests::{amd, sm90};
use crate::backend::executor::plan::{Capabilities, DenseKernel, PlanOptions};

const LAYERS: usize = 15;

/// An attention body of `embedding` = `d_model` wide, 32-deep heads, `dff`-wide FFN and
/// smolgen (32 channels, 256 hidden, 256 generated per head), as T82 and BT4 have.
fn shapes(embedding: usize, dff: usize) -> Shapes {
    Shapes {
        embedding,
        d_model: embedding,
        heads: embedding / 32,
        depth: 32,
        dff,
        input_width: 176,
        dense_size: 0,
        embedding_dff: 0,
        smolgen: Some((32, 256, 256)),
        value: (32, 128, 3),
        mlh: Some((8, 128)),
    }
}

fn t82() -> Shapes {
    shapes(768, 1024)
}

fn bt4() -> Shapes {
    shapes(1024, 1536)
}

fn plan_with(
    shapes: &Shapes,
    device: Arc<Capabilities>,
    options: PlanOptions,
    batch: usize,
    scope: Scope,
) -> BodyPlan {
    let body = Body {
        shapes,
        smolgen_layers: vec![true; LAYERS],
        pe_dense: false,
        default_activation: Activation::Mish,
        smolgen_activation: Activation::Swish,
    };
    let pass = PassPlan::new(device, &options, batch);
    BodyPlan::new(pass, &body, scope).unwrap()
}

fn plan(shapes: &Shapes, device: Arc<Capabilities>, batch: usize) -> BodyPlan {
    plan_with(
        shapes,
        device,
        PlanOptions::default(),
        batch,
        Scope::WholePass,
    )
}

fn kernel_name(fused: Option<(NormDense, Launch)>) -> Option<&'static str> {
    fused.map(|(kernel, _)| kernel.name())
}

#[test]
fn t82_at_batch_1_on_sm_90_fuses_its_norms_and_uses_tensor_cores() {
    let p = plan(&t82(), sm90(), 1);
    assert!(p.pass.programmatic_launch);
    assert_eq!(p.attention.name(), "attention_mma_d32");
    assert_eq!(p.attention_launch.heads_per_block, Some(1));
    assert!(!p.attention_adds_qkv_bias());
    // LN1 + FFN1 (768 → 1024): 32 × 4 blocks, one wave on 132 SMs.
    let (kernel, launch) = p.layers[0].ln1_ffn1.expect("fused at batch 1");
    assert_eq!(
        (kernel.name(), launch.grid),
        ("layer_norm_dense_mma_k768", [32, 4, 1])
    );
    // Every layer's stream continues in the QKV buffer; each LN2 but the last goes into the
    // next layer's smolgen compression.
    for (index, layer) in p.layers.iter().enumerate() {
        assert_eq!(layer.stream, Stream::Qkv, "{index}");
        let expected = (index + 1 < LAYERS).then_some("layer_norm_dense_mma_k768");
        assert_eq!(kernel_name(layer.ln2_to_next), expected, "{index}");
    }
    assert_eq!(p.ln2_from_previous(0), None);
    assert_eq!(
        p.ln2_from_previous(3).map(|(previous, _)| previous),
        Some(2)
    );
    // The stream's 768-wide rows: 8 blocks of 8 warps, gamma and beta loaded early; smolgen's
    // 256-wide swish rows in a warp, its 6144-wide ones in a block of 1024 threads.
    assert_eq!(p.stream_norm.to_string(), "layer_norm_warp_early_c3");
    let [ln1, ln2] = p.smolgen_norms.expect("smolgen");
    assert_eq!(ln1.to_string(), "layer_norm_warp_swish_early_c1");
    assert_eq!(ln2.to_string(), "layer_norm (1024 threads)");
    // Dense layers of 64 rows: dense_mma (QKV's wide member), a position's row: dense_rows.
    assert_eq!(p.pass.dense(64, 768, 2304).to_string(), "dense_mma_k768_g4");
    assert_eq!(p.pass.dense(1, 2048, 256).to_string(), "dense_rows");
}

#[test]
fn t82_at_batch_64_on_sm_90_uses_the_library_gemm_and_separate_norms() {
    let p = plan(&t82(), sm90(), 64);
    assert!(!p.pass.programmatic_launch);
    assert_eq!(p.attention.name(), "attention_mma_d32");
    assert_eq!(p.attention_launch.heads_per_block, Some(4));
    for layer in &p.layers {
        assert_eq!(
            *layer,
            LayerPlan {
                ln1_ffn1: None,
                stream: Stream::X,
                ln2_to_next: None
            }
        );
    }
    assert_eq!(p.pass.dense(64 * 64, 768, 2304), DenseKernel::Library);
    assert_eq!(p.stream_norm.to_string(), "layer_norm_warp_c3");
}

#[test]
fn bt4_at_batch_1_leaves_ffn1_alone_but_fuses_ln2_into_the_compression() {
    // LN1 + FFN1 (1024 → 1536) would be 48 × 4 = 192 blocks, more than 132 SMs.
    let p = plan(&bt4(), sm90(), 1);
    assert_eq!(p.layers[0].ln1_ffn1, None);
    for (index, layer) in p.layers.iter().enumerate() {
        let last = index + 1 == LAYERS;
        let stream = if last { Stream::X } else { Stream::Qkv };
        assert_eq!(layer.stream, stream, "{index}");
        let expected = (!last).then_some("layer_norm_dense_mma_k1024");
        assert_eq!(kernel_name(layer.ln2_to_next), expected, "{index}");
    }
}

#[test]
fn amd_runs_no_nvidia_only_kernel() {
    for batch in [1, 8, 64] {
        let p = plan(&t82(), amd(), batch);
        assert!(!p.pass.programmatic_launch);
        assert_eq!(p.attention.name(), "attention_d32");
        assert_eq!(p.attention_launch.heads_per_block, None);
        assert!(p.attention_adds_qkv_bias());
        for layer in &p.layers {
            assert_eq!(
                (layer.ln1_ffn1, layer.stream, layer.ln2_to_next),
                (None, Stream::X, None)
            );
        }
        let rows = batch * SQUARES;
        for (inputs, outputs) in [(768, 2304), (768, 768), (768, 1024), (1024, 768)] {
            assert!(
                !matches!(p.pass.dense(rows, inputs, outputs), DenseKernel::Mma(..)),
                "{batch}: {inputs} → {outputs}"
            );
        }
    }
}

#[test]
fn layer_by_layer_every_layer_completes_its_stream() {
    let p = plan_with(
        &t82(),
        sm90(),
        PlanOptions::default(),
        1,
        Scope::LayerByLayer,
    );
    for layer in &p.layers {
        assert!(layer.ln1_ffn1.is_some());
        assert_eq!(layer.ln2_to_next, None);
    }
}

#[test]
fn the_options_turn_the_fused_kernels_off() {
    let off = PlanOptions {
        norm_dense_max_batch: 0,
        dense_mma_max_batch: 0,
        programmatic_max_batch: 0,
        matrix_attention: false,
        se_board: false,
    };
    let p = plan_with(&t82(), sm90(), off, 1, Scope::WholePass);
    assert!(!p.pass.programmatic_launch);
    assert_eq!(p.attention.name(), "attention_d32");
    assert!(p.layers.iter().all(|l| *l
        == LayerPlan {
            ln1_ffn1: None,
            stream: Stream::X,
            ln2_to_next: None
        }));
    assert_eq!(p.pass.dense(64, 768, 2304), DenseKernel::Library);
}

#[test]
fn the_plan_names_its_choices() {
    let text = plan(&t82(), sm90(), 1).to_string();
    for part in [
        "batch 1: programmatic launch",
        "qkv dense_mma_k768_g4",
        "attention: attention_mma_d32, 1 head(s) a block, grid 24×1, launched once the QKV GEMM has finished",
        "LayerNorm: stream layer_norm_warp_early_c3",
        "layers 0–13: ln1+ffn1 in layer_norm_dense_mma_k768 (32×4 blocks); stream in the QKV buffer; ln2 in the next layer's layer_norm_dense_mma_k768",
        "layer 14: ln1+ffn1 in layer_norm_dense_mma_k768 (32×4 blocks); stream in the QKV buffer; ln2 alone",
    ] {
        assert!(text.contains(part), "{part:?} not in\n{text}");
    }
    let amd = plan(&t82(), amd(), 64).to_string();
    assert!(
        amd.contains("layers 0–14: ln1, then ffn1; stream in x; ln2 alone"),
        "{amd}"
    );
}
