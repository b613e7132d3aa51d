//! Checks of the Winograd convolution kernels (`hip/winograd.hip`, with the host's weight
//! transform and the device's batched product) against the direct 3×3 convolution in f64,
//! written from its definition (lc0's: `out[k][s] = Σ_c Σ_tap w[k][c][tap] · x[c][s + offset]`,
//! zero off the board), for both output tiles. Every buffer a kernel writes is poisoned (NaN)
//! first, so a point or output left unwritten fails the check.

// Index loops are the point of a reference written from the definition.
#![allow(clippy::needless_range_loop)]

use lc0rs::gpu::kernels::{SE_POSITIONS, WinogradTile, activation_code, launchers};
use lc0rs::gpu::{DevicePtr, GpuBuffer, GpuDevice, Launch};
use lc0rs::weights::format::Activation;

use super::conv_kernels::se_f64;
use super::gpu::{activate_f64, worse};
use super::kernels::{download, poisoned, random_f16, upload};

const TILES: [WinogradTile; 2] = [WinogradTile::F2, WinogradTile::F4];

/// `values` on the device as f32 (the residual stream's type).
fn upload_f32(device: &dyn GpuDevice, values: &[f32]) -> GpuBuffer {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut b = device.alloc(bytes.len()).unwrap();
    b.copy_from_host(device, 0, &bytes).unwrap();
    b
}

fn download_f32(device: &dyn GpuDevice, buffer: &GpuBuffer, n: usize) -> Vec<f32> {
    let mut bytes = vec![0u8; n * 4];
    buffer.copy_to_host(device, 0, &mut bytes).unwrap();
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// That `x_half` (downloaded fp16) is the f32 stream `x` rounded to the nearest fp16.
fn assert_rounded(x_half: &[f32], x: &[f32], label: &str) {
    for (i, (&h, &f)) in x_half.iter().zip(x).enumerate() {
        let want = half::f16::from_f32(f).to_f32();
        assert!(
            h == want,
            "{label}: x_half[{i}] = {h}, the stream {f} rounds to {want}"
        );
    }
}

/// The largest error a check allows, relative to the result's root mean square: the direct
/// convolution in fp16 stays near 1e-3 (the output's rounding), F(2×2) within a few times
/// that, F(4×4), whose transforms round at values up to tens of times larger, within ten.
fn tolerance(tile: WinogradTile) -> f64 {
    match tile {
        WinogradTile::F2 => 6e-3,
        WinogradTile::F4 => 5e-2,
    }
}

/// The direct convolution of square-major `x` (`[batch·64][inputs]`) with `w[k][c][tap]`, in
/// f64, square-major (`[batch·64][outputs]`), plus `bias`.
fn conv3x3_f64(x: &[f32], batch: usize, inputs: usize, w: &[f32], bias: &[f32]) -> Vec<f64> {
    let outputs = bias.len();
    let mut out = vec![0.0f64; batch * 64 * outputs];
    for b in 0..batch {
        for s in 0..64i32 {
            let (rank, file) = (s / 8, s % 8);
            for k in 0..outputs {
                let mut sum = f64::from(bias[k]);
                for tap in 0..9i32 {
                    let (r, f) = (rank + tap / 3 - 1, file + tap % 3 - 1);
                    if !((0..8).contains(&r) && (0..8).contains(&f)) {
                        continue;
                    }
                    let row = (b * 64 + (r * 8 + f) as usize) * inputs;
                    for c in 0..inputs {
                        sum += f64::from(w[(k * inputs + c) * 9 + tap as usize])
                            * f64::from(x[row + c]);
                    }
                }
                out[(b * 64 + s as usize) * outputs + k] = sum;
            }
        }
    }
    out
}

/// The largest error of `got` against `want`, relative to `want`'s root mean square.
fn max_error(got: &[f32], want: &[f64]) -> f64 {
    let rms = (want.iter().map(|t| t * t).sum::<f64>() / want.len() as f64).sqrt();
    got.iter()
        .zip(want)
        .fold(0.0, |w, (&g, &t)| worse(w, (f64::from(g) - t).abs() / rms))
}

/// One convolution's weights on the device: random taps, their Winograd points and a bias.
struct Conv {
    taps: Vec<f32>,
    bias: Vec<f32>,
    points: GpuBuffer,
    bias_gpu: GpuBuffer,
    inputs: usize,
}

impl Conv {
    /// Taps scaled so that an output's root mean square is about twice an input's.
    fn random(
        device: &dyn GpuDevice,
        tile: WinogradTile,
        (inputs, outputs): (usize, usize),
        seed: u64,
    ) -> Self {
        let scale = 3.0 / ((9 * inputs) as f32).sqrt();
        let taps = random_f16(outputs * inputs * 9, seed, scale);
        let bias = random_f16(outputs, seed + 1, 0.5);
        let points = upload(device, &tile.weight_points(&taps, outputs, inputs));
        let bias_gpu = upload(device, &bias);
        Self {
            taps,
            bias,
            points,
            bias_gpu,
            inputs,
        }
    }

    fn outputs(&self) -> usize {
        self.bias.len()
    }

    /// The products of every point from the points in `v` into `m`, on the device.
    fn products(
        &self,
        device: &dyn GpuDevice,
        tile: WinogradTile,
        v: &GpuBuffer,
        m: &GpuBuffer,
        batch: usize,
    ) {
        let shape = (self.inputs, self.outputs());
        let product = tile.products(batch, shape, v.ptr(), self.points.ptr(), m.ptr());
        // SAFETY: v holds the points of `batch` boards of C channels, m room for their products
        // of K, the weights points × K × C.
        unsafe { device.batched_product(&product) }.unwrap();
    }
}

/// A convolution's input as lc0 sends planes: `channels` random masks (u64) and values a board,
/// the values f16 (as the points round them anyway), and the same planes square-major
/// (`[batch·64][channels]`, the value where the square's bit is set, else 0) for the reference.
struct Planes {
    masks: GpuBuffer,
    values: GpuBuffer,
    squares: Vec<f32>,
}

impl Planes {
    fn random(device: &dyn GpuDevice, batch: usize, channels: usize, seed: u64) -> Self {
        let n = batch * channels;
        let values = random_f16(n, seed, 2.0);
        // Masks from the bits of more random values: about half the squares set.
        let masks: Vec<u64> = random_f16(n * 4, seed + 1, 1.0)
            .chunks_exact(4)
            .map(|w| {
                w.iter().fold(0u64, |m, v| {
                    (m << 16) ^ u64::from(v.to_bits() as u16) ^ (m >> 48)
                })
            })
            .collect();
        let mut squares = vec![0.0; batch * 64 * channels];
        for board in 0..batch {
            for c in 0..channels {
                let (mask, value) = (masks[board * channels + c], values[board * channels + c]);
                for s in (0..64).filter(|s| mask >> s & 1 == 1) {
                    squares[(board * 64 + s) * channels + c] = value;
                }
            }
        }
        let masks_bytes: Vec<u8> = masks.iter().flat_map(|m| m.to_le_bytes()).collect();
        let values_bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let [gpu_masks, gpu_values] = [masks_bytes, values_bytes].map(|bytes| {
            let mut buffer = device.alloc(bytes.len()).unwrap();
            buffer.copy_from_host(device, 0, &bytes).unwrap();
            buffer
        });
        Self {
            masks: gpu_masks,
            values: gpu_values,
            squares,
        }
    }
}

/// `winograd_planes` of `planes` (`channels` a board) into a fresh poisoned buffer sized for
/// `widest` channels.
fn input_points(
    device: &dyn GpuDevice,
    tile: WinogradTile,
    planes: &Planes,
    channels: usize,
    widest: usize,
    batch: usize,
) -> GpuBuffer {
    let v = poisoned(device, tile.batch_points(batch) * widest);
    // SAFETY: the planes hold `batch × channels` masks and values, v the points of
    // `widest ≥ channels`.
    unsafe {
        launchers::winograd_planes(
            device,
            tile.kernels().0,
            Launch::elements(tile.tiles_per_board() * batch * channels),
            planes.masks.ptr(),
            planes.values.ptr(),
            channels as i32,
            v.ptr(),
            batch as i32,
        )
    }
    .unwrap();
    v
}

/// `winograd_output` of `m` (`conv`'s products) with `act` into the fp16 `out`, the next
/// convolution's points `v` and the channel means `means` where given.
fn output(
    device: &dyn GpuDevice,
    tile: WinogradTile,
    (m, conv): (&GpuBuffer, &Conv),
    act: Activation,
    out: DevicePtr,
    (v, means): (Option<DevicePtr>, Option<DevicePtr>),
    batch: usize,
) {
    // SAFETY: m holds the products of `batch` boards of K channels; the out and v buffers are
    // the callers', sized for them.
    unsafe {
        launchers::winograd_output(
            device,
            tile.kernels().1,
            tile.output_launch(batch, conv.outputs()),
            m.ptr(),
            conv.outputs() as i32,
            conv.bias_gpu.ptr(),
            activation_code(act),
            out,
            v,
            means,
        )
    }
    .unwrap();
}

/// `winograd_stream_output` of `m` (`conv`'s products) with `act` and the skip from the f32
/// stream `x` (updated in place), rounded into `x_half` and transformed into `v`.
fn stream_output(
    device: &dyn GpuDevice,
    tile: WinogradTile,
    (m, conv): (&GpuBuffer, &Conv),
    act: Activation,
    (x, x_half, v): (&GpuBuffer, &GpuBuffer, &GpuBuffer),
    batch: usize,
) {
    // SAFETY: m holds the products of `batch` boards of K channels, x `batch × 64 × K` f32,
    // x_half as many halves, v room for the next points.
    unsafe {
        launchers::winograd_stream_output(
            device,
            tile.stream_output_kernel(),
            tile.output_launch(batch, conv.outputs()),
            m.ptr(),
            conv.outputs() as i32,
            conv.bias_gpu.ptr(),
            Some(x.ptr()),
            activation_code(act),
            x.ptr(),
            Some(x_half.ptr()),
            Some(v.ptr()),
        )
    }
    .unwrap();
}

/// The input transform, the products and the output transform into the f32 stream with a skip
/// and Mish against `act(conv(x) + bias + residual)`, its fp16 copy the stream rounded; then the
/// output transform's points for the next convolution, through a second convolution, against
/// the direct convolution of the stream it wrote.
pub fn check_winograd_convolutions(device: &dyn GpuDevice) {
    // Channel counts below and above a warp, the 112 input planes, and odd widths.
    for tile in TILES {
        for (case, &(batch, c, k, k2)) in [
            (2usize, 16usize, 24usize, 8usize),
            (1, 112, 32, 32),
            (3, 5, 7, 3),
        ]
        .iter()
        .enumerate()
        {
            let seed = 900 + 20 * case as u64;
            let planes = Planes::random(device, batch, c, seed);
            let x = &planes.squares;
            let residual = random_f16(batch * 64 * k, seed + 2, 2.0);
            let first = Conv::random(device, tile, (c, k), seed + 4);
            let second = Conv::random(device, tile, (k, k2), seed + 6);
            let stream = upload_f32(device, &residual);
            let stream_half = poisoned(device, batch * 64 * k);
            let v = input_points(device, tile, &planes, c, c.max(k), batch);
            let m = poisoned(device, tile.batch_points(batch) * k.max(k2));
            first.products(device, tile, &v, &m, batch);
            let buffers = (&stream, &stream_half, &v);
            stream_output(device, tile, (&m, &first), Activation::Mish, buffers, batch);
            let got = download_f32(device, &stream, batch * 64 * k);
            let label = format!("{tile:?} case {case}");
            assert_rounded(
                &download(device, &stream_half, batch * 64 * k),
                &got,
                &label,
            );
            let want: Vec<f64> = conv3x3_f64(x, batch, c, &first.taps, &first.bias)
                .iter()
                .zip(&residual)
                .map(|(&y, &r)| activate_f64(Activation::Mish, y + f64::from(r)))
                .collect();
            let error = max_error(&got, &want);
            assert!(
                error < tolerance(tile),
                "{tile:?} case {case}: max error {error:.2e}"
            );

            let error2 =
                check_next_convolution(device, tile, (&v, &m), &second, &got, batch, &label);
            eprintln!(
                "winograd {tile:?} case {case} ({batch} × {c} → {k} → {k2}): max error {error:.2e}, next {error2:.2e}"
            );
        }
    }
}

/// The next convolution `conv` of the points a transform wrote into `v` (its products into
/// `m`) against the direct convolution in f64 of `input`, the squares the same transform wrote;
/// returns its largest error.
fn check_next_convolution(
    device: &dyn GpuDevice,
    tile: WinogradTile,
    (v, m): (&GpuBuffer, &GpuBuffer),
    conv: &Conv,
    input: &[f32],
    batch: usize,
    label: &str,
) -> f64 {
    let k = conv.outputs();
    let out = poisoned(device, batch * 64 * k);
    conv.products(device, tile, v, m, batch);
    let plain = Activation::Identity;
    output(
        device,
        tile,
        (m, conv),
        plain,
        out.ptr(),
        (None, None),
        batch,
    );
    let got = download(device, &out, batch * 64 * k);
    let want = conv3x3_f64(input, batch, conv.inputs, &conv.taps, &conv.bias);
    let error = max_error(&got, &want);
    assert!(
        error < tolerance(tile),
        "{label}, next convolution: max error {error:.2e}"
    );
    error
}

/// A squeeze-excitation case: its weights on the device.
struct SeCase<'a> {
    tile: WinogradTile,
    batch: usize,
    channels: usize,
    se: usize,
    act: Activation,
    conv: &'a Conv,
    /// fc1's weight and bias, fc2's weight and bias.
    weights: &'a [GpuBuffer],
}

/// `winograd_output` into `y` with the channel means, `se_gates_of_means` (blocks of 64 threads,
/// so that channels beyond the block's threads loop, of `SE_POSITIONS` positions) and
/// `winograd_se_apply`: the skip, the f32 stream `x`, updated and rounded into `x_half`, the
/// next points into `v`.
fn se_split(device: &dyn GpuDevice, c: &SeCase, m: &GpuBuffer, (x, x_half, v): SeOutputs) {
    let (batch, channels) = (c.batch, c.channels);
    let y = poisoned(device, batch * 64 * channels);
    let mut gates = device.alloc(batch * 2 * channels * 4).unwrap();
    gates.fill(device, 0xFF).unwrap(); // f32 NaN
    let plain = Activation::Identity;
    let means = (None, Some(gates.ptr()));
    output(device, c.tile, (m, c.conv), plain, y.ptr(), means, batch);
    // SE_POSITIONS positions a block (the launch of a large batch), so that 11 positions take
    // two blocks, the second short.
    let per_block = SE_POSITIONS;
    let launch = Launch {
        grid: [batch.div_ceil(per_block) as u32, 1, 1],
        block: [64, 1, 1],
        shared_bytes: (per_block * (channels + c.se) * 4) as u32,
    };
    let w = c.weights;
    // SAFETY: y and x_half hold `batch × 64 × channels` halves, x as many f32, gates `batch ×
    // 2·channels` f32 (the means in their first halves), the SE weights their shapes, v the
    // next points.
    unsafe {
        launchers::se_gates_of_means(
            device,
            launch,
            gates.ptr(),
            channels as i32,
            w[0].ptr(),
            w[1].ptr(),
            c.se as i32,
            w[2].ptr(),
            w[3].ptr(),
            activation_code(c.act),
            per_block as i32,
            batch as i32,
        )
        .unwrap();
        launchers::winograd_se_apply(
            device,
            c.tile.kernels().2,
            c.tile.output_launch(batch, channels),
            y.ptr(),
            gates.ptr(),
            channels as i32,
            x.ptr(),
            activation_code(c.act),
            Some(x_half.ptr()),
            Some(v.ptr()),
        )
        .unwrap();
    }
}

/// What a block's end writes: the f32 stream, its fp16 copy and the next points.
type SeOutputs<'a> = (&'a GpuBuffer, &'a GpuBuffer, &'a GpuBuffer);

/// `winograd_se_board` (one block a board) with the products `m`: the f32 stream `x` updated
/// and rounded into `x_half`, the next points into `v`. `None` where the board does not fit a
/// block.
fn se_board(
    device: &dyn GpuDevice,
    c: &SeCase,
    m: &GpuBuffer,
    (x, x_half, v): SeOutputs,
) -> Option<()> {
    let launch = c.tile.se_board_launch(c.batch, c.channels, c.se)?;
    let w = c.weights;
    // SAFETY: m holds the products of `batch` boards, x `batch × 64 × channels` f32 and x_half
    // as many halves, the SE weights their shapes, v room for the next points.
    unsafe {
        launchers::winograd_se_board(
            device,
            c.tile.se_board_kernel(),
            launch,
            m.ptr(),
            c.channels as i32,
            c.conv.bias_gpu.ptr(),
            w[0].ptr(),
            w[1].ptr(),
            c.se as i32,
            w[2].ptr(),
            w[3].ptr(),
            activation_code(c.act),
            x.ptr(),
            Some(x_half.ptr()),
            Some(v.ptr()),
        )
        .unwrap();
    }
    Some(())
}

/// A block's second convolution with squeeze-excitation and the skip, in both forms (three
/// kernels, `se_split`, and one a board, `se_board`, where the board fits a block) against the
/// direct convolution and SE in f64, then the points each wrote, through the next convolution.
/// The widths take both of the gates' loads (16 bytes where C or se is a multiple of 8, else one
/// value), 11 positions two blocks of gates the second short, and 130 channels a board too
/// wide for one block.
pub fn check_winograd_se(device: &dyn GpuDevice) {
    for tile in TILES {
        for (case, &(batch, channels, se, act)) in [
            (2usize, 16usize, 4usize, Activation::Mish),
            (1, 72, 40, Activation::Relu),
            (2, 130, 70, Activation::Mish),
            (11, 24, 8, Activation::Relu),
        ]
        .iter()
        .enumerate()
        {
            let seed = 1000 + 20 * case as u64;
            let planes = Planes::random(device, batch, channels, seed);
            let input = &planes.squares;
            let x = random_f16(batch * 64 * channels, seed + 1, 2.0);
            let conv = Conv::random(device, tile, (channels, channels), seed + 2);
            let next = Conv::random(device, tile, (channels, 8), seed + 4);
            let w1 = random_f16(se * channels, seed + 6, 0.3);
            let b1 = random_f16(se, seed + 7, 0.2);
            let w2 = random_f16(2 * channels * se, seed + 8, 0.3);
            let b2 = random_f16(2 * channels, seed + 9, 0.2);
            let weights: Vec<GpuBuffer> = [&w1, &b1, &w2, &b2]
                .iter()
                .map(|v| upload(device, v))
                .collect();
            let c = SeCase {
                tile,
                batch,
                channels,
                se,
                act,
                conv: &conv,
                weights: &weights,
            };
            let y = conv3x3_f64(input, batch, channels, &conv.taps, &conv.bias);
            let want = se_f64(&y, &x, batch, channels, (&w1, &b1), (&w2, &b2), act);
            for form in ["split", "board"] {
                let x_gpu = upload_f32(device, &x);
                let x_half = poisoned(device, batch * 64 * channels);
                let mut v = input_points(device, tile, &planes, channels, channels, batch);
                let m = poisoned(device, tile.batch_points(batch) * channels);
                conv.products(device, tile, &v, &m, batch);
                v.fill(device, 0xFF).unwrap(); // the next points: NaN until written
                let outputs = (&x_gpu, &x_half, &v);
                if form == "split" {
                    se_split(device, &c, &m, outputs);
                } else if se_board(device, &c, &m, outputs).is_none() {
                    assert!(channels > 64, "{tile:?} case {case}: no board launch");
                    continue;
                }
                let got = download_f32(device, &x_gpu, batch * 64 * channels);
                let label = format!("{tile:?} {form} case {case}");
                assert_rounded(
                    &download(device, &x_half, batch * 64 * channels),
                    &got,
                    &label,
                );
                let error = max_error(&got, &want);
                assert!(
                    error < tolerance(tile),
                    "{tile:?} {form} case {case}: max error {error:.2e}"
                );
                let error2 =
                    check_next_convolution(device, tile, (&v, &m), &next, &got, batch, &label);
                eprintln!(
                    "winograd SE {form} {tile:?} case {case} ({batch} × {channels}, se {se}, {act:?}): max error {error:.2e}, next {error2:.2e}"
                );
            }
        }
    }
}
