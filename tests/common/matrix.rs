//! AMD's matrix instructions (WMMA, MFMA), real or emulated, against a plain matrix product: the
//! registers of every lane are laid out here, from the instruction's documented layout
//! (docs/gpu-apis.md §2.6), not by the kernels' own helpers; every element of A, B and C is
//! distinct, so a transposed or permuted layout on either side gives a different D (checked by
//! laying A out transposed, which must fail).

use lc0rs::gpu::GpuDevice;
use lc0rs::gpu::kernels::{MatrixForm, launchers};
use lc0rs::gpu::{GpuBuffer, Launch};

/// One form's registers: A and B elements per lane, C/D elements per lane, wave size, and where
/// lane `l`'s element `e` sits: A[row][k], B[k][col] (both given as (row or col, k)), D[row][col].
pub struct Layout {
    pub form: MatrixForm,
    pub wave: usize,
    pub ab: usize,
    pub cd: usize,
    pub ab_at: fn(usize, usize) -> (usize, usize),
    pub d_at: fn(usize, usize) -> (usize, usize),
}

/// RDNA3 ISA §7.9 (WMMA): wave32; A row / B column l % 16, k = e (lanes 16–31 repeat 0–15);
/// D row 2e + l / 16, column l % 16.
pub const WMMA_GFX11: Layout = Layout {
    form: MatrixForm::WmmaGfx11,
    wave: 32,
    ab: 16,
    cd: 8,
    ab_at: |l, e| (l % 16, e),
    d_at: |l, e| (2 * e + l / 16, l % 16),
};

/// RDNA4 ISA (WMMA): wave32; A row / B column l % 16, k = 8·(l / 16) + e; D row 8·(l / 16) + e.
pub const WMMA_GFX12: Layout = Layout {
    form: MatrixForm::WmmaGfx12,
    wave: 32,
    ab: 8,
    cd: 8,
    ab_at: |l, e| (l % 16, 8 * (l / 16) + e),
    d_at: |l, e| (8 * (l / 16) + e, l % 16),
};

/// CDNA3 ISA §7 (MFMA, v_mfma_f32_16x16x16f16): wave64; A row / B column l % 16,
/// k = 4·(l / 16) + e; D row 4·(l / 16) + e, column l % 16.
pub const MFMA_16: Layout = Layout {
    form: MatrixForm::Mfma16,
    wave: 64,
    ab: 4,
    cd: 4,
    ab_at: |l, e| (l % 16, 4 * (l / 16) + e),
    d_at: |l, e| (4 * (l / 16) + e, l % 16),
};

/// A 16×16 matrix, rows first.
type Tile = [[f64; 16]; 16];

/// Distinct values for A, B and C, exact in fp16 (multiples of 1/64 and 1/128 up to 2).
fn operands() -> (Tile, Tile, Tile) {
    let mut a = [[0.0; 16]; 16];
    let mut b = [[0.0; 16]; 16];
    let mut c = [[0.0; 16]; 16];
    for i in 0..16 {
        for j in 0..16 {
            let n = (16 * i + j) as f64;
            a[i][j] = (n - 128.0) / 64.0;
            b[i][j] = (((16 * i + j) * 7 % 256) as f64 - 128.0) / 128.0;
            c[i][j] = n / 256.0 + 0.5;
        }
    }
    (a, b, c)
}

/// Each lane's A, B and C elements as the check kernel reads them; with `transposed`, A is laid
/// out as if the layout's row and k were swapped.
fn registers(layout: &Layout, transposed: bool) -> Vec<f32> {
    let (a, b, c) = operands();
    let mut regs = Vec::new();
    for l in 0..layout.wave {
        for e in 0..layout.ab {
            let (row, k) = (layout.ab_at)(l, e);
            regs.push(if transposed { a[k][row] } else { a[row][k] } as f32);
        }
        for e in 0..layout.ab {
            let (col, k) = (layout.ab_at)(l, e);
            regs.push(b[k][col] as f32);
        }
        for e in 0..layout.cd {
            let (row, col) = (layout.d_at)(l, e);
            regs.push(c[row][col] as f32);
        }
    }
    regs
}

fn upload_f32(device: &dyn GpuDevice, values: &[f32]) -> GpuBuffer {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut buffer = device.alloc(bytes.len()).unwrap();
    buffer.copy_from_host(device, 0, &bytes).unwrap();
    buffer
}

/// The instruction of `layout.form` on `regs`: each lane's D elements.
fn run(device: &dyn GpuDevice, layout: &Layout, regs: &[f32]) -> Vec<f32> {
    let input = upload_f32(device, regs);
    let n = layout.wave * layout.cd;
    let output = upload_f32(device, &vec![f32::NAN; n]);
    let launch = Launch {
        grid: [1, 1, 1],
        block: [layout.wave as u32, 1, 1],
        shared_bytes: 0,
    };
    // SAFETY: input holds every lane's A, B and C registers (`regs`), output every lane's D
    // (`wave × cd` f32).
    unsafe {
        launchers::matrix_instruction_check(
            device,
            launch,
            input.ptr(),
            output.ptr(),
            layout.form as i32,
        )
    }
    .unwrap();
    let mut bytes = vec![0u8; n * 4];
    output.copy_to_host(device, 0, &mut bytes).unwrap();
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The largest |D − (A·B + C)| over the 16×16 result, D read back by the documented layout
/// (infinite where an element is NaN).
fn max_error(layout: &Layout, d: &[f32]) -> f64 {
    let (a, b, c) = operands();
    let mut worst = 0.0f64;
    for l in 0..layout.wave {
        for e in 0..layout.cd {
            let (row, col) = (layout.d_at)(l, e);
            let want: f64 = c[row][col] + (0..16).map(|k| a[row][k] * b[k][col]).sum::<f64>();
            let got = f64::from(d[l * layout.cd + e]);
            let error = if got.is_nan() {
                f64::INFINITY
            } else {
                (got - want).abs()
            };
            worst = worst.max(error);
        }
    }
    worst
}

/// The instruction matches A·B + C, and the same A laid out transposed does not.
pub fn check_instruction(device: &dyn GpuDevice, layout: &Layout) {
    assert_eq!(device.info().warp_size as usize, layout.wave);
    let error = max_error(layout, &run(device, layout, &registers(layout, false)));
    // Products of fp16 values are exact in fp32; 16 of them plus C (|D| < 40) add in fp32.
    assert!(error < 1e-4, "{:?}: max abs error {error}", layout.form);
    let transposed = max_error(layout, &run(device, layout, &registers(layout, true)));
    assert!(
        transposed > 0.1,
        "{:?}: A laid out transposed was not caught (max abs error {transposed})",
        layout.form
    );
    eprintln!(
        "{:?}: max abs error {error:.1e}; transposed A: {transposed:.2}",
        layout.form
    );
}

/// WMMA on gfx11 needs both halves of the wave to hold A and B: halves that disagree (one left
/// at zero) must not pass as a product.
pub fn check_wmma_gfx11_halves(device: &dyn GpuDevice) {
    let layout = &WMMA_GFX11;
    let mut regs = registers(layout, false);
    let per_lane = 2 * layout.ab + layout.cd;
    for lane in 16..32 {
        for e in 0..layout.ab {
            regs[lane * per_lane + e] = 0.0;
        }
    }
    let error = max_error(layout, &run(device, layout, &regs));
    assert!(
        error > 0.1,
        "half-filled A was taken (max abs error {error})"
    );
}
