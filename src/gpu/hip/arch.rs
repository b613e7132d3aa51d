//! Checking a gfx architecture against the ISAs comgr knows before hipRTC sees it: hipRTC of
//! ROCm 5.2 and 6.4 aborts the process inside `hiprtcCompileProgram` for a processor it cannot
//! resolve (e.g. `gfx9999`, or `gfx1250` before comgr knows it), where an error naming the close,
//! known names helps.

/// How many known names an error suggests.
const SUGGESTIONS: usize = 5;

/// The processor of an ISA or arch name, without target triple or features:
/// `amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-` and `gfx90a:xnack+` both give `gfx90a`.
pub fn processor(name: &str) -> &str {
    let without_triple = name.rsplit_once("--").map_or(name, |(_, p)| p);
    without_triple.split(':').next().unwrap_or(without_triple)
}

/// Whether `arch` (features allowed) names a processor among `isas` (comgr's ISA names); else
/// why not, with the closest known names.
pub fn check_known(arch: &str, isas: &[String]) -> Result<(), String> {
    let wanted = processor(arch);
    let known: Vec<&str> = isas.iter().map(|isa| processor(isa)).collect();
    if known.contains(&wanted) {
        return Ok(());
    }
    Err(format!(
        "{wanted} is not among the {} ISAs this ROCm's code object manager (comgr) knows, so hipRTC cannot compile for it; closest: {}",
        known.len(),
        closest(wanted, &known).join(", ")
    ))
}

/// Up to [`SUGGESTIONS`] of `known`, each once: nearest to `wanted` by edit distance first; of
/// equally near names, those sharing a longer prefix (the same generation: gfx12…), then list
/// order.
fn closest<'a>(wanted: &str, known: &[&'a str]) -> Vec<&'a str> {
    let mut unique: Vec<&str> = Vec::new();
    for name in known {
        if !unique.contains(name) {
            unique.push(name);
        }
    }
    unique.sort_by_key(|name| {
        (
            edit_distance(wanted, name),
            std::cmp::Reverse(common_prefix(wanted, name)),
        )
    });
    unique.truncate(SUGGESTIONS);
    unique
}

/// How many leading characters `a` and `b` share.
fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// Levenshtein distance: the fewest single-character insertions, deletions and substitutions
/// that turn `a` into `b`.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list shaped like comgr's (some releases add target features to the names).
    fn fake_isas() -> Vec<String> {
        [
            "amdgcn-amd-amdhsa--gfx900",
            "amdgcn-amd-amdhsa--gfx906",
            "amdgcn-amd-amdhsa--gfx908",
            "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-",
            "amdgcn-amd-amdhsa--gfx90a:sramecc-:xnack+",
            "amdgcn-amd-amdhsa--gfx942",
            "amdgcn-amd-amdhsa--gfx1030",
            "amdgcn-amd-amdhsa--gfx1100",
            "amdgcn-amd-amdhsa--gfx1150",
            "amdgcn-amd-amdhsa--gfx1151",
            "amdgcn-amd-amdhsa--gfx1200",
            "amdgcn-amd-amdhsa--gfx1201",
            "amdgcn-amd-amdhsa--gfx12-generic",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn processors_drop_triple_and_features() {
        assert_eq!(
            processor("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"),
            "gfx90a"
        );
        assert_eq!(
            processor("amdgcn-amd-amdhsa--gfx9-4-generic"),
            "gfx9-4-generic"
        );
        assert_eq!(processor("gfx90a:xnack+"), "gfx90a");
        assert_eq!(processor("gfx1100"), "gfx1100");
    }

    #[test]
    fn known_processors_pass_with_or_without_features() {
        let isas = fake_isas();
        for arch in [
            "gfx90a",
            "gfx90a:xnack-",
            "gfx942",
            "gfx1151",
            "gfx12-generic",
        ] {
            assert_eq!(check_known(arch, &isas), Ok(()), "{arch}");
        }
    }

    /// By hand: gfx1250 is one substitution from gfx1200 (prefix gfx12) and gfx1150 (gfx1), two
    /// from gfx1201 (gfx12) and from gfx1030, gfx1100, gfx1151 (gfx1, list order decides).
    #[test]
    fn an_unknown_processor_lists_the_nearest_names() {
        let e = check_known("gfx1250", &fake_isas()).unwrap_err();
        assert!(e.starts_with("gfx1250 is not among the 13 ISAs"), "{e}");
        assert!(
            e.ends_with("closest: gfx1200, gfx1150, gfx1201, gfx1030, gfx1100"),
            "{e}"
        );
        let e = check_known("gfx9999:xnack+", &fake_isas()).unwrap_err();
        assert!(e.starts_with("gfx9999 is not"), "{e}");
        // gfx90a appears twice in the list and is suggested once.
        assert_eq!(e.matches("gfx90a").count(), 1, "{e}");
        assert!(check_known("gfx90a", &[]).is_err());
    }

    #[test]
    fn edit_distances_by_hand() {
        assert_eq!(edit_distance("gfx1250", "gfx1200"), 1);
        assert_eq!(edit_distance("gfx1250", "gfx1100"), 2);
        assert_eq!(edit_distance("gfx9999", "gfx90a"), 3);
        assert_eq!(edit_distance("", "gfx"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(common_prefix("gfx1250", "gfx1201"), 5);
    }
}
