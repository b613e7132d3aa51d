//! The warp LayerNorm family (`layer_norm_warp_*` in hip/norms.hip): its members, made from one
//! list of row widths as the kernel source makes them, and which member holds a row.

use crate::weights::format::Activation;

/// A member of the warp LayerNorm family: rows of at most `chunks` chunks of 8 values a lane,
/// swish (smolgen's) or the identity before the residual, gamma and beta loaded with the row
/// (`early`) or after the sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LayerNormWarp {
    pub chunks: usize,
    pub swish: bool,
    pub early: bool,
    name: &'static str,
}

impl LayerNormWarp {
    /// The member's entry point in `hip/norms.hip`.
    pub fn name(self) -> &'static str {
        self.name
    }
}

/// Makes [`LayerNormWarp::ALL`] and [`LayerNormWarp::NAMES`] from the row widths: each width
/// gives its identity and swish members, and a width marked `early` also the two that load
/// gamma and beta with the row (as `LAYER_NORM_WARP_LATE` and `LAYER_NORM_WARP_EARLY` in
/// hip/norms.hip).
macro_rules! layer_norm_warp_widths {
    ($($chunks:literal $($early:ident)?),+ $(,)?) => {
        impl LayerNormWarp {
            /// Every member, width by width.
            pub const ALL: &[Self] = &[$(
                layer_norm_warp_widths!(@member $chunks, false, false, "c"),
                layer_norm_warp_widths!(@member $chunks, true, false, "swish_c"),
                $(
                    layer_norm_warp_widths!(@member $chunks, false, $early, "early_c"),
                    layer_norm_warp_widths!(@member $chunks, true, $early, "swish_early_c"),
                )?
            )+];

            /// Every member's entry point, in the order of [`Self::ALL`].
            pub const NAMES: &[&str] = &[$(
                concat!("layer_norm_warp_c", $chunks),
                concat!("layer_norm_warp_swish_c", $chunks),
                $(
                    layer_norm_warp_widths!(@name $early, "layer_norm_warp_early_c", $chunks),
                    layer_norm_warp_widths!(@name $early, "layer_norm_warp_swish_early_c", $chunks),
                )?
            )+];
        }
    };
    (@member $chunks:literal, $swish:literal, early, $infix:literal) => {
        layer_norm_warp_widths!(@member $chunks, $swish, true, $infix)
    };
    (@member $chunks:literal, $swish:literal, $early:literal, $infix:literal) => {
        LayerNormWarp {
            chunks: $chunks,
            swish: $swish,
            early: $early,
            name: concat!("layer_norm_warp_", $infix, $chunks),
        }
    };
    (@name early, $prefix:literal, $chunks:literal) => {
        concat!($prefix, $chunks)
    };
}

// The family's row widths in chunks of 8 values a lane, one line a width (hip/norms.hip
// instantiates the same; a unit test compares the two).
layer_norm_warp_widths! {
    1 early,
    2 early,
    3 early,
    4 early,
    6,
    8,
}

/// The widest row the warp LayerNorm takes (64 values per lane of a 32-wide warp).
pub const WARP_NORM_MAX_COLS: usize = 2048;

/// The warp LayerNorm kernel for rows of `cols` values (a multiple of 8) with activation `act`
/// before the residual (identity, or swish as smolgen's): the narrowest member whose registers
/// hold a row. With `early` (asked where the launch has at most one block per SM, so that
/// registers cost no occupancy), the member of that width that loads gamma and beta with the
/// row, where the width has one. `None` where only the block kernel fits.
pub fn layer_norm_warp_kernel(
    cols: usize,
    warp_size: usize,
    act: Activation,
    early: bool,
) -> Option<LayerNormWarp> {
    let swish = match act {
        Activation::Identity => false,
        Activation::Swish => true,
        _ => return None,
    };
    let chunks = cols.div_ceil(8 * warp_size);
    let width = LayerNormWarp::ALL
        .iter()
        .map(|m| m.chunks)
        .filter(|&c| c >= chunks)
        .min()?;
    let member = |early| {
        LayerNormWarp::ALL
            .iter()
            .find(|m| m.chunks == width && m.swish == swish && m.early == early)
            .copied()
    };
    member(early).or_else(|| member(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::kernels::expand::expanded_source;

    /// Each member is instantiated in the kernel source with the chunks, activation and early
    /// loads the Rust side believes it has.
    #[test]
    fn members_match_their_instantiations() {
        let source = expanded_source();
        for member in LayerNormWarp::ALL {
            let at = source
                .find(&format!("KERNEL void {}(", member.name()))
                .unwrap_or_else(|| panic!("{} is not instantiated", member.name()));
            let act = if member.swish {
                "ACT_SWISH"
            } else {
                "ACT_IDENTITY"
            };
            let body = format!(
                "layer_norm_warp_body<{}, {act}, {}>(",
                member.chunks, member.early
            );
            let end = at + source[at..].find('}').expect("a kernel body");
            assert!(source[at..end].contains(&body), "{}", member.name());
        }
        assert_eq!(LayerNormWarp::NAMES.len(), LayerNormWarp::ALL.len());
        for (member, name) in LayerNormWarp::ALL.iter().zip(LayerNormWarp::NAMES) {
            assert_eq!(member.name(), *name);
        }
    }

    #[test]
    fn warp_layer_norm_kernels_hold_a_row() {
        let id = Activation::Identity;
        // T82's 768-wide rows: 3 chunks of 8 per lane on 32-wide warps, 2 on 64-wide waves.
        for (cols, warp, kernel) in [
            (768, 32, "layer_norm_warp_c3"),
            (768, 64, "layer_norm_warp_c2"),
            (1024, 32, "layer_norm_warp_c4"),
            (64, 32, "layer_norm_warp_c1"),
            (1280, 32, "layer_norm_warp_c6"),
            (2048, 32, "layer_norm_warp_c8"),
        ] {
            assert_eq!(
                layer_norm_warp_kernel(cols, warp, id, false).map(LayerNormWarp::name),
                Some(kernel),
                "{cols}"
            );
        }
        // Early gamma and beta up to 4 chunks; wider rows keep the plain member.
        for (cols, early) in [
            (768, "layer_norm_warp_early_c3"),
            (1024, "layer_norm_warp_early_c4"),
            (2048, "layer_norm_warp_c8"),
        ] {
            let got = layer_norm_warp_kernel(cols, 32, id, true).map(LayerNormWarp::name);
            assert_eq!(got, Some(early), "{cols}");
        }
        assert_eq!(layer_norm_warp_kernel(2056, 32, id, false), None);
        // Smolgen's 256-wide swish rows; other activations take the block kernel.
        let swish = |early| {
            layer_norm_warp_kernel(256, 32, Activation::Swish, early).map(LayerNormWarp::name)
        };
        assert_eq!(swish(false), Some("layer_norm_warp_swish_c1"));
        assert_eq!(swish(true), Some("layer_norm_warp_swish_early_c1"));
        assert_eq!(
            layer_norm_warp_kernel(256, 32, Activation::Mish, true),
            None
        );
        for act in [id, Activation::Swish] {
            for cols in (8..=WARP_NORM_MAX_COLS).step_by(8) {
                for early in [false, true] {
                    let kernel = layer_norm_warp_kernel(cols, 32, act, early);
                    assert!(kernel.is_some(), "{cols}");
                }
            }
        }
        assert_eq!(LayerNormWarp::ALL.len(), 20);
    }
}
