//! Where a network comes from, as given to `-w`: a file path, `preset:NAME` (generated once into
//! a cache directory, then reused), or nothing (the bundled `tiny` net, built into the binary).

use std::path::{Path, PathBuf};

use crate::netgen::{self, all_preset_names};
use crate::weights::codec::LayerEncoding;
use crate::weights::export::{to_proto, write_net_file};
use crate::weights::tower_export::tower_to_proto;
use crate::weights::{self, FileInfo, LoadOptions, Model, WeightsError};

/// The networks shipped in `weights/`, built from `gen-net` (see `weights/README.md`).
pub const BUNDLED: [(&str, &[u8]); 2] = [
    ("tiny", include_bytes!("../weights/tiny.pb.gz")),
    ("tiny-dense", include_bytes!("../weights/tiny-dense.pb.gz")),
];

/// The seed `preset:NAME` networks are generated with (also `gen-net`'s default).
pub const PRESET_SEED: u64 = 1;

/// A parsed `-w` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetSource {
    /// A network built into the binary (`bundled:NAME`; `-w` omitted means `bundled:tiny`).
    Bundled(&'static str),
    /// `preset:NAME`: generated with [`PRESET_SEED`] into the cache on first use.
    Preset(String),
    File(PathBuf),
}

impl NetSource {
    /// Parses `-w`; `None` is the bundled tiny net.
    pub fn parse(spec: Option<&str>) -> Result<Self, WeightsError> {
        let Some(spec) = spec else {
            return Ok(Self::Bundled(BUNDLED[0].0));
        };
        if let Some(name) = spec.strip_prefix("preset:") {
            return if all_preset_names().contains(&name) {
                Ok(Self::Preset(name.to_owned()))
            } else {
                Err(usage(format!(
                    "unknown preset {name:?} in -w {spec:?}; presets: {}",
                    all_preset_names().join(", ")
                )))
            };
        }
        if let Some(name) = spec.strip_prefix("bundled:") {
            return BUNDLED
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(n, _)| Self::Bundled(n))
                .ok_or_else(|| {
                    let names: Vec<_> = BUNDLED.iter().map(|(n, _)| *n).collect();
                    usage(format!(
                        "unknown bundled net {name:?}; bundled: {}",
                        names.join(", ")
                    ))
                });
        }
        Ok(Self::File(PathBuf::from(spec)))
    }

    /// A short name for messages and reports.
    pub fn display_name(&self) -> String {
        match self {
            Self::Bundled(name) => format!("bundled:{name}"),
            Self::Preset(name) => format!("preset:{name}"),
            Self::File(path) => path.display().to_string(),
        }
    }

    /// Loads the network, generating a preset's file first if the cache lacks it.
    /// `progress(done, total)` follows that generation.
    pub fn load(
        &self,
        options: &LoadOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(Model, FileInfo), WeightsError> {
        match self {
            Self::Bundled(name) => {
                let bytes = BUNDLED
                    .iter()
                    .find(|(n, _)| n == name)
                    .expect("parsed name")
                    .1;
                weights::load_model_bytes(bytes, &self.display_name(), options)
            }
            Self::Preset(name) => {
                let path = ensure_preset_file(name, progress)?;
                weights::load_model_file_with_info(&path, options)
            }
            Self::File(path) => weights::load_model_file_with_info(path, options),
        }
    }
}

fn usage(what: String) -> WeightsError {
    WeightsError::NotWeights {
        file: "-w".to_owned(),
        what,
    }
}

/// The cache directory: `$LC0RS_CACHE_DIR`, else `lc0rs` in the platform's cache directory
/// (`$XDG_CACHE_HOME` or `~/.cache` on Linux, `%LOCALAPPDATA%` on Windows, `~/Library/Caches` on
/// macOS), else in the system temporary directory.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LC0RS_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("lc0rs")
}

/// The cached file of `preset:NAME`, written now if it is not there yet.
pub fn ensure_preset_file(
    name: &str,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<PathBuf, WeightsError> {
    let dir = cache_dir();
    let path = dir.join(format!("{name}-seed{PRESET_SEED}-linear16.pb.gz"));
    if path.is_file() {
        return Ok(path);
    }
    std::fs::create_dir_all(&dir).map_err(|error| WeightsError::Write {
        file: dir.display().to_string(),
        error,
    })?;
    write_preset(
        name,
        PRESET_SEED,
        LayerEncoding::Linear16,
        None,
        &path,
        progress,
    )?;
    Ok(path)
}

/// Generates preset `name` (attention body or residual tower) with `seed` and writes it to
/// `path` in `encoding`; `layers` replaces the preset's number of encoder layers or residual
/// blocks (a net of the preset's shape, shorter or longer).
pub fn write_preset(
    name: &str,
    seed: u64,
    encoding: LayerEncoding,
    layers: Option<usize>,
    path: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Model, WeightsError> {
    let (model, net) = if let Some(mut arch) = netgen::preset(name) {
        arch.encoders = layers.unwrap_or(arch.encoders);
        let network = netgen::generate(&arch, seed);
        let net = to_proto(&network, encoding);
        (Model::Attention(network), net)
    } else if let Some(mut arch) = netgen::tower_preset(name) {
        arch.blocks = layers.unwrap_or(arch.blocks);
        let tower = netgen::generate_tower(&arch, seed);
        let net = tower_to_proto(&tower, encoding);
        (Model::Residual(tower), net)
    } else {
        return Err(usage(format!(
            "unknown preset {name:?}; presets: {}",
            all_preset_names().join(", ")
        )));
    };
    write_net_file(&net, path, progress)?;
    Ok(model)
}
