//! The kernel source with its kernel-making macros expanded, for the tests that read kernel
//! declarations: a family such as the warp LayerNorm is one `#define` of a kernel and a line a
//! member, and the declarations the tests compare with the launchers are those the
//! preprocessor makes. Only the macros that make kernels (a `KERNEL void` in their body, or a
//! call of such a macro) are expanded, each expansion starting a line of its own; the rest of
//! the source is left as written.

use super::source;

/// A function-like macro: its parameters and its body (continuation lines joined).
struct Macro {
    name: String,
    params: Vec<String>,
    body: String,
}

/// [`source`] with every kernel-making macro definition removed and every call of one replaced
/// by its expansion.
pub fn expanded_source() -> String {
    expand(&source())
}

/// `text` with its kernel-making macros expanded (see the module's comment).
pub fn expand(text: &str) -> String {
    let (macros, mut rest) = kernel_macros(text);
    // A macro's body may call another; expand until no call is left (the bodies are finite).
    while let Some(next) = expand_once(&rest, &macros) {
        rest = next;
    }
    rest
}

/// The kernel-making macros of `text`, and `text` without their definitions.
fn kernel_macros(text: &str) -> (Vec<Macro>, String) {
    let mut makers = Vec::new();
    let mut others = Vec::new();
    for (m, _) in definitions(text) {
        if m.body.contains("KERNEL void ") {
            makers.push(m);
        } else {
            others.push(m);
        }
    }
    // Macros that call a kernel-making macro make kernels too.
    loop {
        let (calling, not): (Vec<_>, Vec<_>) = others
            .into_iter()
            .partition(|m| makers.iter().any(|k| find_call(&m.body, &k.name).is_some()));
        others = not;
        if calling.is_empty() {
            break;
        }
        makers.extend(calling);
    }
    let mut rest = text.to_owned();
    for (m, original) in definitions(text) {
        if makers.iter().any(|k| k.name == m.name) {
            rest = rest.replacen(&original, "", 1);
        }
    }
    (makers, rest)
}

/// Every function-like macro definition of `text`, with its text as written (continuation
/// lines included).
fn definitions(text: &str) -> Vec<(Macro, String)> {
    let mut found = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(definition) = line.trim_start().strip_prefix("#define ") else {
            continue;
        };
        let mut joined = definition.to_owned();
        let mut original = line.to_owned();
        while joined.ends_with('\\') {
            joined.pop();
            let next = lines.next().unwrap_or_default();
            joined.push_str(next);
            original.push('\n');
            original.push_str(next);
        }
        if let Some(m) = function_like(&joined) {
            found.push((m, original));
        }
    }
    found
}

/// `NAME(a, b) body` as a macro, or `None` for an object-like one.
fn function_like(definition: &str) -> Option<Macro> {
    let open = definition.find('(')?;
    let name = &definition[..open];
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let close = open + definition[open..].find(')')?;
    let params = definition[open + 1..close]
        .split(',')
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    Some(Macro {
        name: name.to_owned(),
        params,
        body: definition[close + 1..].trim().to_owned(),
    })
}

/// `text` with its first call of one of `macros` expanded, or `None` where it calls none.
fn expand_once(text: &str, macros: &[Macro]) -> Option<String> {
    let (at, m) = macros
        .iter()
        .filter_map(|m| find_call(text, &m.name).map(|at| (at, m)))
        .min_by_key(|(at, _)| *at)?;
    let open = at + m.name.len();
    let close = open + matching_paren(&text[open..])?;
    let args: Vec<&str> = text[open + 1..close].split(',').map(str::trim).collect();
    let body = substitute(&m.body, &m.params, &args).replace("KERNEL void ", "\nKERNEL void ");
    Some(format!("{}{body}\n{}", &text[..at], &text[close + 1..]))
}

/// Where `name(` is called in `text` as a whole identifier.
fn find_call(text: &str, name: &str) -> Option<usize> {
    let call = format!("{name}(");
    text.match_indices(&call).map(|(at, _)| at).find(|&at| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The offset in `text` (which starts with `(`) of the parenthesis that closes it.
fn matching_paren(text: &str) -> Option<usize> {
    let mut depth = 0;
    for (at, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(at);
                }
            }
            _ => {}
        }
    }
    None
}

/// `body` with each parameter (a whole identifier) replaced by its argument, then `##` pasted.
fn substitute(body: &str, params: &[String], args: &[&str]) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let replaced = params
            .iter()
            .position(|p| p == word)
            .map_or(word.as_str(), |i| args[i]);
        out.push_str(replaced);
        word.clear();
    };
    for c in body.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out.replace(" ## ", "").replace("##", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_making_macros_expand_as_the_preprocessor_does() {
        let text = concat!(
            "#define WIDTH 4\n",
            "#define MEMBER(NAME, N) \\\n",
            "  KERNEL void k_##NAME(int* x) { PRIOR_KERNELS_DONE(); body<N>(x); }\n",
            "#define PAIR(N) MEMBER(a##N, N) MEMBER(b##N, N)\n",
            "PAIR(1)\n",
            "MEMBER(c, WIDTH)\n",
        );
        let expanded = expand(text);
        assert!(expanded.starts_with("#define WIDTH 4\n"), "{expanded}");
        for kernel in [
            "KERNEL void k_a1(int* x) { PRIOR_KERNELS_DONE(); body<1>(x); }",
            "KERNEL void k_b1(int* x) { PRIOR_KERNELS_DONE(); body<1>(x); }",
            "KERNEL void k_c(int* x) { PRIOR_KERNELS_DONE(); body<WIDTH>(x); }",
        ] {
            assert!(expanded.contains(&format!("\n{kernel}")), "{expanded}");
        }
        assert!(
            !expanded.contains("MEMBER(") && !expanded.contains("##"),
            "{expanded}"
        );
    }
}
