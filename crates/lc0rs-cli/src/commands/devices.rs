//! `lc0rs devices` and `lc0rs compile-kernels`: what GPU runtimes are present, and whether
//! every kernel compiles for a target.

use std::time::Instant;

use lc0rs::gpu::{cuda, emu, hip, kernels};

use super::CommandError;

/// Prints each GPU runtime found (ROCm, the emulated AMD GPU, CUDA) and its GPUs.
pub fn devices() {
    let sections: [(&str, Vec<String>); 3] = [
        ("ROCm:", hip::report()),
        ("hip-emu (an emulated AMD GPU on the CPU):", emu::report()),
        ("CUDA:", cuda::report()),
    ];
    for (title, lines) in sections {
        println!("{title}");
        for line in lines {
            println!("  {line}");
        }
    }
}

/// Prints the kernel files, one path (from the checkout's root) a line, in the order they follow
/// `hip/prelude.h` in the one source every compiler builds: `KERNEL_FILES`, for scripts that
/// compile the files themselves.
pub fn list_kernel_files() {
    for (name, _) in kernels::KERNEL_FILES {
        println!("hip/{name}");
    }
}

/// The vendors whose run-time compiler `compile-kernels` drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Vendor {
    Cuda,
    /// hipRTC, and where to write its code object, if anywhere.
    Hip(Option<std::path::PathBuf>),
}

/// Compiles every kernel for `arch` with the vendor's run-time compiler, prints one line per
/// kernel and fails if one is missing from the result.
pub fn compile_kernels(vendor: Vendor, arch: &str) -> Result<(), CommandError> {
    match vendor {
        Vendor::Hip(code_object) => compile_hip(arch, code_object.as_deref()),
        Vendor::Cuda => compile_cuda(arch),
    }
}

fn compile_hip(arch: &str, code_object: Option<&std::path::Path>) -> Result<(), CommandError> {
    let started = Instant::now();
    let code = hip::compile_kernels(arch)?;
    // The matrix-core kernels where the arch has a form (the compile checked they are there).
    let matrix = kernels::amd_matrix_form(arch).is_some();
    let names: Vec<_> = kernels::shared_kernel_names()
        .chain(kernels::matrix_kernel_names().filter(|_| matrix))
        .collect();
    for name in &names {
        println!("{name}: compiled");
    }
    if let Some(path) = code_object {
        std::fs::write(path, &code).map_err(|source| CommandError::Write {
            path: path.to_owned(),
            source,
        })?;
    }
    eprintln!(
        "compiled {} kernels for {arch} with hipRTC in {:.2} s ({} byte code object)",
        names.len(),
        started.elapsed().as_secs_f64(),
        code.len()
    );
    Ok(())
}

fn compile_cuda(arch: &str) -> Result<(), CommandError> {
    let started = Instant::now();
    let ptx = cuda::nvrtc::compile(arch)?.to_src();
    let number = cuda_arch_number(arch)?;
    let names = kernels::cuda_kernel_names(number);
    for name in &names {
        let found = ptx_has_entry(&ptx, name);
        println!("{name}: {}", if found { "compiled" } else { "MISSING" });
        if !found {
            return Err(CommandError::MissingKernel {
                kernel: name.to_string(),
                arch: arch.to_owned(),
            });
        }
    }
    eprintln!(
        "compiled {} kernels for {arch} in {:.2} s",
        names.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `sm_90` → 90.
pub fn cuda_arch_number(arch: &str) -> Result<u32, CommandError> {
    arch.strip_prefix("sm_")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| CommandError::NotCudaArch(arch.to_owned()))
}

/// Whether PTX text defines the kernel `name` (an `.entry name(` line).
pub fn ptx_has_entry(ptx: &str, name: &str) -> bool {
    ptx.contains(&format!(".entry {name}("))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_arch_numbers() {
        assert_eq!(cuda_arch_number("sm_90").unwrap(), 90);
        assert_eq!(cuda_arch_number("sm_120").unwrap(), 120);
        for bad in ["gfx90a", "sm_", "sm_9x", "90"] {
            let error = cuda_arch_number(bad).unwrap_err().to_string();
            assert!(error.contains(bad) && error.contains("sm_90"), "{error}");
        }
    }

    #[test]
    fn ptx_entries_match_whole_names() {
        let ptx = ".visible .entry layer_norm(\n.param .u64 a\n)\n.visible .entry fill_half(";
        assert!(ptx_has_entry(ptx, "layer_norm"));
        assert!(ptx_has_entry(ptx, "fill_half"));
        assert!(!ptx_has_entry(ptx, "layer"));
        assert!(!ptx_has_entry(ptx, "norm"));
    }
}
