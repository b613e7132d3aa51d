//! Which GPUs a GPU backend runs on, and how it shares the work among them: the options
//! `gpu=N` (one GPU), `gpus=all` or `gpus=N,M,...` (several), `policy=split|rr` and
//! `split_min=ROWS`.

use super::{BackendError, BackendOptions};

/// The fewest positions a GPU is given of a split batch, by default: a smaller part costs a
/// pass's fixed time (launch, copies, the tail of the GPU's work) for too little work, so a
/// batch smaller than twice this runs on one GPU.
pub const DEFAULT_SPLIT_MIN: usize = 32;

/// How the calls of a backend over several GPUs are shared among them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharePolicy {
    /// Each call's batch is divided among the GPUs (each part at least `min_rows` positions,
    /// in proportion to how fast each GPU has been), the parts run at once and the outputs
    /// are joined in the batch's order (lc0's `demux`).
    Split { min_rows: usize },
    /// Each call runs whole on one GPU: the one with the fewest calls in flight, the GPUs
    /// taken in turn among equals (lc0's `roundrobin`, made aware of the load for callers
    /// whose calls differ in length).
    RoundRobin,
}

/// The GPUs asked for and the policy, as read from the options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuSelection {
    asked: Asked,
    pub policy: SharePolicy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Asked {
    /// `gpu=N`, or neither option: GPU 0.
    One(usize),
    /// `gpus=all`.
    All,
    /// `gpus=N,M,...`, in the order given.
    List(Vec<usize>),
}

impl GpuSelection {
    /// Takes `gpu`, `gpus`, `policy` and `split_min` from `options`.
    pub fn take(backend: &str, options: &BackendOptions) -> Result<Self, BackendError> {
        let bad = |key: &str, value: &str, reason: String| BackendError::BadOption {
            backend: backend.to_owned(),
            key: key.to_owned(),
            value: value.to_owned(),
            reason,
        };
        let one = options.get::<usize>(backend, "gpu")?;
        let many = options.get::<String>(backend, "gpus")?;
        let asked = match (one, many) {
            (Some(_), Some(list)) => {
                return Err(bad(
                    "gpus",
                    &list,
                    "give either gpu=N (one GPU) or gpus=... (several), not both".to_owned(),
                ));
            }
            (one, None) => Asked::One(one.unwrap_or(0)),
            (None, Some(list)) if list == "all" => Asked::All,
            (None, Some(list)) => {
                Asked::List(parse_list(&list).map_err(|r| bad("gpus", &list, r))?)
            }
        };
        let split_min = options.get::<usize>(backend, "split_min")?;
        if split_min == Some(0) {
            return Err(bad("split_min", "0", "must be at least 1".to_owned()));
        }
        let policy = match options.get::<String>(backend, "policy")?.as_deref() {
            None | Some("split") => SharePolicy::Split {
                min_rows: split_min.unwrap_or(DEFAULT_SPLIT_MIN),
            },
            Some("rr") if split_min.is_some() => {
                return Err(bad(
                    "split_min",
                    &split_min.unwrap_or_default().to_string(),
                    "applies to policy=split only".to_owned(),
                ));
            }
            Some("rr") => SharePolicy::RoundRobin,
            Some(other) => {
                return Err(bad("policy", other, "expected split or rr".to_owned()));
            }
        };
        Ok(Self { asked, policy })
    }

    /// The GPU ordinals to run on. `count` (how many GPUs the machine has) is asked only for
    /// `gpus=`: a single `gpu=N` is checked by opening it, whose error names the runtime.
    pub fn ordinals(
        &self,
        backend: &str,
        count: impl FnOnce() -> Result<usize, BackendError>,
    ) -> Result<Vec<usize>, BackendError> {
        let bad = |value: String, reason: String| BackendError::BadOption {
            backend: backend.to_owned(),
            key: "gpus".to_owned(),
            value,
            reason,
        };
        match &self.asked {
            Asked::One(gpu) => Ok(vec![*gpu]),
            Asked::All => match count()? {
                0 => Err(bad("all".to_owned(), "this machine has no GPU".to_owned())),
                n => Ok((0..n).collect()),
            },
            Asked::List(list) => {
                let n = count()?;
                match list.iter().find(|&&gpu| gpu >= n) {
                    Some(gpu) => Err(bad(
                        join(list),
                        format!("there is no GPU {gpu}: this machine has {n} ({})", range(n)),
                    )),
                    None => Ok(list.clone()),
                }
            }
        }
    }
}

/// `0,2,3` as ordinals: at least one, none twice.
fn parse_list(list: &str) -> Result<Vec<usize>, String> {
    let mut ordinals = Vec::new();
    for item in list.split(',').map(str::trim) {
        if item.is_empty() {
            return Err("expected all or GPU numbers separated by commas".to_owned());
        }
        let gpu = item
            .parse::<usize>()
            .map_err(|_| format!("{item:?} is not a GPU number"))?;
        if ordinals.contains(&gpu) {
            return Err(format!("GPU {gpu} is named twice"));
        }
        ordinals.push(gpu);
    }
    Ok(ordinals)
}

fn join(list: &[usize]) -> String {
    list.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The ordinals a machine with `n` GPUs has, in words.
fn range(n: usize) -> String {
    match n {
        0 => "none".to_owned(),
        1 => "GPU 0".to_owned(),
        n => format!("GPUs 0 to {}", n - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(text: &str) -> Result<GpuSelection, BackendError> {
        let options = BackendOptions::parse(text).unwrap();
        let selection = GpuSelection::take("cuda-fp16", &options)?;
        options.finish("cuda-fp16")?;
        Ok(selection)
    }

    fn ordinals(text: &str, machine: usize) -> Result<Vec<usize>, String> {
        take(text)
            .and_then(|s| s.ordinals("cuda-fp16", || Ok(machine)))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn one_gpu_by_default_and_by_number() {
        assert_eq!(ordinals("", 4).unwrap(), [0]);
        assert_eq!(ordinals("gpu=3", 4).unwrap(), [3]);
        // A single GPU is checked when it is opened, not against a count.
        let selection = take("gpu=7").unwrap();
        let ordinals = selection.ordinals("cuda-fp16", || panic!("count asked for one GPU"));
        assert_eq!(ordinals.unwrap(), [7]);
    }

    #[test]
    fn several_gpus_in_the_order_given_or_all() {
        assert_eq!(ordinals("gpus=2,0", 4).unwrap(), [2, 0]);
        assert_eq!(ordinals("gpus=all", 3).unwrap(), [0, 1, 2]);
        assert_eq!(ordinals("gpus=1", 2).unwrap(), [1]);
    }

    #[test]
    fn missing_duplicate_and_empty_gpus_are_errors_naming_them() {
        let e = ordinals("gpus=0,2", 2).unwrap_err();
        assert!(
            e.contains("no GPU 2") && e.contains("has 2 (GPUs 0 to 1)"),
            "{e}"
        );
        let e = ordinals("gpus=1,0,1", 4).unwrap_err();
        assert!(e.contains("GPU 1 is named twice"), "{e}");
        let e = ordinals("gpus=", 4).unwrap_err();
        assert!(e.contains("expected all or GPU numbers"), "{e}");
        let e = ordinals("gpus=all", 0).unwrap_err();
        assert!(e.contains("no GPU"), "{e}");
        let e = ordinals("gpus=0,x", 4).unwrap_err();
        assert!(e.contains("\"x\" is not a GPU number"), "{e}");
        let e = ordinals("gpu=0,gpus=1", 4).unwrap_err();
        assert!(e.contains("not both"), "{e}");
    }

    #[test]
    fn policies_and_their_options() {
        let split = |min_rows| SharePolicy::Split { min_rows };
        assert_eq!(take("").unwrap().policy, split(DEFAULT_SPLIT_MIN));
        assert_eq!(
            take("gpus=0,1,policy=split,split_min=8").unwrap().policy,
            split(8)
        );
        assert_eq!(take("policy=rr").unwrap().policy, SharePolicy::RoundRobin);
        for (text, part) in [
            ("policy=demux", "expected split or rr"),
            ("split_min=0", "at least 1"),
            ("policy=rr,split_min=4", "policy=split only"),
        ] {
            let e = take(text).unwrap_err().to_string();
            assert!(e.contains(part), "{text}: {e}");
        }
    }
}
