//! Compiles `proto/net.proto` with protox (pure Rust, so no `protoc` is needed on any machine)
//! and generates the prost types for `pblczero`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/net.proto");
    let descriptors = protox::compile(["proto/net.proto"], ["proto"])?;
    prost_build::Config::new()
        // `bytes::Bytes` lets a decode from a `Bytes` buffer share it instead of copying every
        // layer's parameters (about 190 MB for T82).
        .bytes(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
