//! Winograd F(m×m, 3×3) for `hip/winograd.hip`: which output tile, what it costs in points and
//! tiles, its members of the transform kernels, and the weight transform `G·g·Gᵀ` done once on
//! the host (it must match the kernels' `Bᵀ` and `Aᵀ`, whose points it shares).

use super::launchers::{
    WinogradOutput, WinogradPlanes, WinogradSeApply, WinogradSeBoard, WinogradStreamOutput,
};
use crate::gpu::{BatchedProduct, DevicePtr, Launch};

/// Channels per block of `winograd_output` and `winograd_se_apply` (`WINOGRAD_CHANNELS` in
/// hip/winograd.hip), side by side in a warp, each with every tile of one board.
pub const WINOGRAD_CHANNELS: usize = 32;

/// The output tile of a Winograd F(m×m, 3×3) convolution: m = 2 or 4.
///
/// F(4×4) needs a quarter of the direct convolution's multiplications, F(2×2) 4/9 of them; in
/// fp16 F(4×4)'s error is 6–10 times the direct convolution's and F(2×2)'s 1.5–2 times (the
/// transformed inputs, weights and products each round at values larger than the result, by
/// up to `Aᵀ`'s and `Bᵀ`'s coefficients), so the two trade speed for accuracy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WinogradTile {
    /// F(2×2, 3×3) on the points 0, ±1, ∞: 16 tiles a board, 16 points a tile.
    F2,
    /// F(4×4, 3×3) on the points 0, ±1/2, ±2, ∞ (two thirds of the fp16 error of lc0's 0, ±1,
    /// ±2): 4 tiles a board, 36 points a tile.
    F4,
}

/// F(2×2, 3×3)'s weight transform `G` (4 × 3).
const G_F2: [[f64; 3]; 4] = [
    [1.0, 0.0, 0.0],
    [0.5, 0.5, 0.5],
    [0.5, -0.5, 0.5],
    [0.0, 0.0, 1.0],
];

/// F(4×4, 3×3)'s weight transform `G` (6 × 3) on the points 0, 1/2, −1/2, 2, −2, ∞: row j is
/// (1, pⱼ, pⱼ²) over the product of pⱼ's differences to the other finite points.
const G_F4: [[f64; 3]; 6] = [
    [1.0, 0.0, 0.0],
    [-8.0 / 15.0, -4.0 / 15.0, -2.0 / 15.0],
    [-8.0 / 15.0, 4.0 / 15.0, -2.0 / 15.0],
    [1.0 / 30.0, 1.0 / 15.0, 2.0 / 15.0],
    [1.0 / 30.0, -1.0 / 15.0, 2.0 / 15.0],
    [0.0, 0.0, 1.0],
];

impl WinogradTile {
    /// The weight transform, one row per point of a tile's side.
    fn g(self) -> &'static [[f64; 3]] {
        match self {
            Self::F2 => &G_F2,
            Self::F4 => &G_F4,
        }
    }

    /// Points per tile: (m + 2)².
    pub fn points(self) -> usize {
        self.g().len().pow(2)
    }

    /// Tiles per board: (8 / m)².
    pub fn tiles_per_board(self) -> usize {
        match self {
            Self::F2 => 16,
            Self::F4 => 4,
        }
    }

    /// A batch's points per channel: points per tile × tiles per board × `batch`.
    pub fn batch_points(self, batch: usize) -> usize {
        self.points() * self.tiles_per_board() * batch
    }

    /// The GEMMs of a convolution of `inputs` to `outputs` channels over `batch` boards, one a
    /// point: `M_ξ[tile][K] = V_ξ[tile][C] · U_ξ[K][C]ᵀ`, from the tile-major `points`
    /// (`[tiles][points][C]`, hip/winograd.hip) and `weights` (`weight_points`, `[points][K][C]`)
    /// into the tile-major `products` (`[tiles][points][K]`): a point's rows are a tile's
    /// points·C values apart, its first row C values after the point before.
    pub fn products(
        self,
        batch: usize,
        (inputs, outputs): (usize, usize),
        points: DevicePtr,
        weights: DevicePtr,
        products: DevicePtr,
    ) -> BatchedProduct {
        let (per_tile, c, k) = (self.points(), inputs, outputs);
        BatchedProduct {
            batch: per_tile,
            m: self.tiles_per_board() * batch,
            n: k,
            k: c,
            alpha: 1.0,
            a: points,
            lda: per_tile * c,
            stride_a: c,
            b: weights,
            ldb: c,
            stride_b: k * c,
            b_transposed: false,
            c: products,
            ldc: per_tile * k,
            stride_c: k,
        }
    }

    /// The launch of `winograd_output` or `winograd_se_apply` over `batch` boards of
    /// `channels` channels: a block per board and group of `WINOGRAD_CHANNELS`, the groups of a
    /// board neighbours.
    pub fn output_launch(self, batch: usize, channels: usize) -> Launch {
        Launch {
            grid: [(batch * channels.div_ceil(WINOGRAD_CHANNELS)) as u32, 1, 1],
            block: [(WINOGRAD_CHANNELS * self.tiles_per_board()) as u32, 1, 1],
            shared_bytes: 0,
        }
    }

    /// The tile's members of the three transform kernels.
    pub fn kernels(self) -> (WinogradPlanes, WinogradOutput, WinogradSeApply) {
        match self {
            Self::F2 => (WinogradPlanes::F2, WinogradOutput::F2, WinogradSeApply::F2),
            Self::F4 => (WinogradPlanes::F4, WinogradOutput::F4, WinogradSeApply::F4),
        }
    }

    /// The tile's member of `winograd_stream_output`.
    pub fn stream_output_kernel(self) -> WinogradStreamOutput {
        match self {
            Self::F2 => WinogradStreamOutput::F2,
            Self::F4 => WinogradStreamOutput::F4,
        }
    }

    /// The tile's member of `winograd_se_board`.
    pub fn se_board_kernel(self) -> WinogradSeBoard {
        match self {
            Self::F2 => WinogradSeBoard::F2,
            Self::F4 => WinogradSeBoard::F4,
        }
    }

    /// The launch of `winograd_se_board` (a block per board holding every tile of every
    /// channel) over `batch` boards of `channels` with `se` hidden units, or `None` where the
    /// board does not fit one block: more than 1024 threads (`tiles × channels` rounded up to
    /// 32 a tile) or 48 KB of shared memory.
    pub fn se_board_launch(self, batch: usize, channels: usize, se: usize) -> Option<Launch> {
        let width = channels.next_multiple_of(WINOGRAD_CHANNELS);
        let threads = self.tiles_per_board() * width;
        let floats = threads + 3 * channels + se + 64 * channels;
        let shared = floats * size_of::<f32>();
        (threads <= 1024 && shared <= 48 * 1024).then_some(Launch {
            grid: [batch as u32, 1, 1],
            block: [threads as u32, 1, 1],
            shared_bytes: shared as u32,
        })
    }

    /// A 3×3 convolution's weights (`weights[k][c][tap]`, lc0's order, tap = 3·row + column
    /// with rows along the ranks) as Winograd points: `U = G·g·Gᵀ` (point `n·row + column` of
    /// the n × n tile) for every output `k` and input `c`, stored `[points][K][C]`, one `[K][C]`
    /// matrix per point (computed in f64).
    pub fn weight_points(self, weights: &[f32], outputs: usize, inputs: usize) -> Vec<f32> {
        debug_assert_eq!(weights.len(), outputs * inputs * 9);
        let g_rows = self.g();
        let n = g_rows.len();
        let mut out = vec![0.0; self.points() * outputs * inputs];
        for (kc, taps) in weights.chunks_exact(9).enumerate() {
            let g = |row: usize, col: usize| f64::from(taps[row * 3 + col]);
            for (a, ga) in g_rows.iter().enumerate() {
                for (b, gb) in g_rows.iter().enumerate() {
                    let mut u = 0.0;
                    for (i, gai) in ga.iter().enumerate() {
                        for (j, gbj) in gb.iter().enumerate() {
                            u += gai * g(i, j) * gbj;
                        }
                    }
                    out[(a * n + b) * outputs * inputs + kc] = u as f32;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A board fits one block of `winograd_se_board` up to 1024 threads (64 channels in F(2×2),
    /// rounded up to 32 a tile) and 48 KB of shared memory (the board's new x staged in f32:
    /// 171 channels in F(4×4) with 32 SE units); wider towers take the three kernels.
    #[test]
    fn the_board_kernel_takes_boards_up_to_1024_threads_and_48_kb() {
        let threads = |tile: WinogradTile, c| tile.se_board_launch(7, c, 32).map(|l| l.block[0]);
        assert_eq!(threads(WinogradTile::F2, 64), Some(1024));
        assert_eq!(threads(WinogradTile::F2, 40), Some(1024));
        assert_eq!(threads(WinogradTile::F2, 65), None);
        assert_eq!(threads(WinogradTile::F4, 171), Some(768));
        assert_eq!(threads(WinogradTile::F4, 172), None);
        assert_eq!(threads(WinogradTile::F4, 256), None);
        assert_eq!(
            WinogradTile::F4.se_board_launch(7, 24, 8).unwrap().grid,
            [7, 1, 1]
        );
    }

    /// The 1-D F(m, 3) identity the kernels rely on, with their `Bᵀ` and `Aᵀ` written out
    /// again here: `Aᵀ·((G·g) ⊙ (Bᵀ·d)) = (Σₖ gₖ·d_{i+k})ᵢ` for unit inputs and taps.
    #[test]
    #[allow(clippy::needless_range_loop)] // the identity's indices, as written
    fn the_weight_transform_matches_the_kernels_transforms() {
        let bt_f2: [[f64; 4]; 4] = [
            [1.0, 0.0, -1.0, 0.0],
            [0.0, 1.0, 1.0, 0.0],
            [0.0, -1.0, 1.0, 0.0],
            [0.0, 1.0, 0.0, -1.0],
        ];
        let at_f2: [[f64; 4]; 2] = [[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, -1.0, -1.0]];
        let bt_f4: [[f64; 6]; 6] = [
            [1.0, 0.0, -4.25, 0.0, 1.0, 0.0],
            [0.0, -2.0, -4.0, 0.5, 1.0, 0.0],
            [0.0, 2.0, -4.0, -0.5, 1.0, 0.0],
            [0.0, -0.5, -0.25, 2.0, 1.0, 0.0],
            [0.0, 0.5, -0.25, -2.0, 1.0, 0.0],
            [0.0, 1.0, 0.0, -4.25, 0.0, 1.0],
        ];
        let at_f4: [[f64; 6]; 4] = [
            [1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
            [0.0, 0.5, -0.5, 2.0, -2.0, 0.0],
            [0.0, 0.25, 0.25, 4.0, 4.0, 0.0],
            [0.0, 0.125, -0.125, 8.0, -8.0, 1.0],
        ];
        let bt: [&[&[f64]]; 2] = [
            &bt_f2.iter().map(|r| &r[..]).collect::<Vec<_>>(),
            &bt_f4.iter().map(|r| &r[..]).collect::<Vec<_>>(),
        ];
        let at: [&[&[f64]]; 2] = [
            &at_f2.iter().map(|r| &r[..]).collect::<Vec<_>>(),
            &at_f4.iter().map(|r| &r[..]).collect::<Vec<_>>(),
        ];
        for (t, tile) in [WinogradTile::F2, WinogradTile::F4].into_iter().enumerate() {
            let g = tile.g();
            let n = g.len();
            for tap in 0..3 {
                for input in 0..n {
                    // y_i = Σ_j Aᵀ[i][j] · (G·e_tap)_j · (Bᵀ·e_input)_j, and directly
                    // y_i = [input == i + tap].
                    for (i, row) in at[t].iter().enumerate() {
                        let y: f64 = (0..n).map(|j| row[j] * g[j][tap] * bt[t][j][input]).sum();
                        let want = if input == i + tap { 1.0 } else { 0.0 };
                        assert!(
                            (y - want).abs() < 1e-12,
                            "{tile:?} tap {tap} input {input} output {i}: {y}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn output_channels_match_the_kernel() {
        let define = format!("#define WINOGRAD_CHANNELS {WINOGRAD_CHANNELS}\n");
        assert!(super::super::source().contains(&define));
    }

    #[test]
    fn weight_points_are_point_major() {
        // 2 outputs, 1 input; output 1's taps are all 0 but the centre, 1.
        let mut weights = vec![0.0; 18];
        weights[9 + 4] = 1.0;
        let u = WinogradTile::F2.weight_points(&weights, 2, 1);
        assert_eq!(u.len(), 16 * 2);
        // Point (a, b) of output 1 is (G·e₁)_a·(G·e₁)_b: G's middle column is 0, ½, −½, 0.
        let middle = [0.0, 0.5, -0.5, 0.0];
        for a in 0..4 {
            for b in 0..4 {
                assert_eq!(u[(a * 4 + b) * 2 + 1], (middle[a] * middle[b]) as f32);
                assert_eq!(u[(a * 4 + b) * 2], 0.0);
            }
        }
    }
}
