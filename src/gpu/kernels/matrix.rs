//! AMD matrix cores: which archs have a form of the matrix-core kernels (`hip/matrix.hip`) and
//! their entry points.

use super::launchers;

/// The matrix-core form an AMD architecture's kernels are built on (`LC0RS_MATRIX_FORM` in
/// hip/prelude.h, whose arch list this mirrors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatrixForm {
    /// `v_wmma_f32_16x16x16_f16`, RDNA3/3.5 (gfx11xx), wave32.
    WmmaGfx11 = 1,
    /// The same instruction in RDNA4's (gfx12xx) register layout, wave32.
    WmmaGfx12 = 2,
    /// `v_mfma_f32_16x16x16f16`, CDNA2/3/4 (gfx90a, gfx94x, gfx950), wave64.
    Mfma16 = 3,
}

/// The matrix-core form of `arch` (a processor name, features allowed), or `None` where the
/// portable kernels run (RDNA1/2, GCN, gfx908 and unknown names).
pub fn amd_matrix_form(arch: &str) -> Option<MatrixForm> {
    let processor = arch.split(':').next().unwrap_or(arch);
    match processor {
        "gfx1100" | "gfx1101" | "gfx1102" | "gfx1103" | "gfx1150" | "gfx1151" | "gfx1152"
        | "gfx1153" => Some(MatrixForm::WmmaGfx11),
        "gfx1200" | "gfx1201" => Some(MatrixForm::WmmaGfx12),
        "gfx90a" | "gfx940" | "gfx941" | "gfx942" | "gfx950" => Some(MatrixForm::Mfma16),
        _ => None,
    }
}

/// The AMD matrix-core kernels (compiled where [`amd_matrix_form`] names a form).
pub fn matrix_kernel_names() -> impl Iterator<Item = &'static str> {
    launchers::entry_points(launchers::AMD_MATRIX).map(|k| k.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::kernels::{MATRIX_ATTENTION_WAVES, source};

    #[test]
    fn matrix_forms_by_arch() {
        assert_eq!(amd_matrix_form("gfx1100"), Some(MatrixForm::WmmaGfx11));
        assert_eq!(amd_matrix_form("gfx1151"), Some(MatrixForm::WmmaGfx11));
        assert_eq!(amd_matrix_form("gfx1201"), Some(MatrixForm::WmmaGfx12));
        assert_eq!(
            amd_matrix_form("gfx90a:sramecc+:xnack-"),
            Some(MatrixForm::Mfma16)
        );
        assert_eq!(amd_matrix_form("gfx942"), Some(MatrixForm::Mfma16));
        assert_eq!(amd_matrix_form("gfx950"), Some(MatrixForm::Mfma16));
        for portable in [
            "gfx1030", "gfx908", "gfx906", "gfx1010", "gfx1250", "emulated",
        ] {
            assert_eq!(amd_matrix_form(portable), None, "{portable}");
        }
        // The prelude names the same archs (as __gfxNNNN__ macros).
        let prelude = include_str!("../../../hip/prelude.h");
        for arch in [
            "gfx1100", "gfx1103", "gfx1151", "gfx1153", "gfx1200", "gfx1201", "gfx90a",
        ] {
            assert!(prelude.contains(&format!("defined(__{arch}__)")), "{arch}");
        }
        for arch in ["gfx940", "gfx941", "gfx942", "gfx950"] {
            assert!(prelude.contains(&format!("defined(__{arch}__)")), "{arch}");
        }
        assert_eq!(
            [
                MatrixForm::WmmaGfx11,
                MatrixForm::WmmaGfx12,
                MatrixForm::Mfma16
            ]
            .map(|f| f as i32),
            [1, 2, 3]
        );
        assert!(source().contains("#define MATRIX_ATTENTION_THREADS (4 * WARP_SIZE)"));
        assert_eq!(MATRIX_ATTENTION_WAVES, 4);
    }
}
