//! Redis' glob patterns (KEYS, SCAN MATCH, CONFIG GET, COMMAND LIST FILTERBY PATTERN), on bytes.
//!
//! `*` matches any run of bytes, `?` any one byte, `[abc]`, `[a-z]` and `[^...]` one byte of a
//! class (a reversed range counts as the same range; `\` escapes inside a class too), and `\x`
//! the byte `x`. Edge cases follow redis-server 7.0: `[]` is an empty class that matches
//! nothing, a class missing its `]` runs to the end of the pattern (so a lone `[` matches
//! nothing), and a `\` ending the pattern is a literal backslash.
//!
//! Matching never recurses: the text is walked once, going back only to the last `*` seen, so a
//! pattern such as `*a*a*a*a*b` costs at most (pattern length × text length) steps. That matters
//! because KEYS runs on every replica, and a pattern must not be able to stall them.

/// True when `text` matches the whole of `pattern`.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the last `*`: the pattern after it, and the text it will swallow next.
    let mut resume: Option<(usize, usize)> = None;
    while t < text.len() {
        if pattern.get(p) == Some(&b'*') {
            p += 1;
            resume = Some((p, t));
            continue;
        }
        if let Some(length) = token_matches(&pattern[p.min(pattern.len())..], text[t]) {
            p += length;
            t += 1;
            continue;
        }
        // A mismatch: the last `*` swallows one more byte, or nothing can match.
        let Some((after_star, swallowed)) = resume else { return false };
        resume = Some((after_star, swallowed + 1));
        (p, t) = (after_star, swallowed + 1);
    }
    pattern[p.min(pattern.len())..].iter().all(|&b| b == b'*')
}

/// The length of the pattern token at the start of `pattern` when it matches `byte` (a `*` is
/// handled by the caller); `None` when it does not match or the pattern is used up.
fn token_matches(pattern: &[u8], byte: u8) -> Option<usize> {
    match pattern {
        [] | [b'*', ..] => None,
        [b'?', ..] => Some(1),
        [b'[', class @ ..] => {
            let (matched, length) = class_matches(class, byte);
            matched.then_some(1 + length)
        }
        [b'\\', escaped, ..] => (*escaped == byte).then_some(2),
        [literal, ..] => (*literal == byte).then_some(1),
    }
}

/// Whether `byte` is in the class that `class` (the pattern after `[`) starts with, and how many
/// pattern bytes the class takes after the `[`, its `]` included when there is one.
fn class_matches(class: &[u8], byte: u8) -> (bool, usize) {
    let negated = class.first() == Some(&b'^');
    let mut at = usize::from(negated);
    let mut matched = false;
    loop {
        match &class[at..] {
            [] => break,
            [b']', ..] => {
                at += 1;
                break;
            }
            [b'\\', escaped, ..] => {
                matched |= *escaped == byte;
                at += 2;
            }
            [low, b'-', high, ..] => {
                matched |= (*low.min(high)..=*low.max(high)).contains(&byte);
                at += 3;
            }
            [literal, ..] => {
                matched |= *literal == byte;
                at += 1;
            }
        }
    }
    assert!(at <= class.len(), "a class never reads past the pattern");
    (matched != negated, at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn patterns_match_as_redis_does() {
        // Goal: the pattern language against cases checked with KEYS on redis-server 7.0.15,
        // edge cases of classes and escapes included.
        for (pattern, text, expected) in [
            ("*", "maxclients", true),
            ("max*", "maxclients", true),
            ("*clients", "maxclients", true),
            ("p?rt", "port", true),
            ("p?rt", "prt", false),
            ("[pb]ort", "bort", true),
            ("[^p]ort", "port", false),
            ("[a-c]x", "bx", true),
            ("[z-a]", "b", true),
            ("\\*", "*", true),
            ("\\*", "a", false),
            ("x\\*y", "x*y", true),
            ("x\\*y", "xzy", false),
            ("[", "[", false),
            ("[^", "-", true),
            ("[a", "a", true),
            ("[]", "]", false),
            ("[^]", "a", true),
            ("[a-]", "^", true),
            ("[a-]", "b", false),
            ("[\\]]", "]", true),
            ("[\\", "\\", true),
            ("[-]", "-", true),
            ("\\", "\\", true),
            ("a\\", "a\\", true),
            ("**b", "ab", true),
            ("*[", "a[", false),
            ("", "", true),
            ("", "a", false),
            ("a*", "", false),
            ("**", "", true),
        ] {
            assert_eq!(glob_match(pattern.as_bytes(), text.as_bytes()), expected, "{pattern:?} vs {text:?}");
        }
    }

    /// The plain recursive reading of the same rules: the oracle the iterative matcher is
    /// checked against (STYLE 6).
    fn recursive(pattern: &[u8], text: &[u8]) -> bool {
        match pattern.first() {
            None => text.is_empty(),
            Some(b'*') => (0..=text.len()).any(|skip| recursive(&pattern[1..], &text[skip..])),
            Some(_) => match text.split_first() {
                None => false,
                Some((&first, rest)) => match pattern[0] {
                    b'?' => recursive(&pattern[1..], rest),
                    b'[' => {
                        let (matched, length) = class_matches(&pattern[1..], first);
                        matched && recursive(&pattern[1 + length..], rest)
                    }
                    b'\\' if pattern.len() >= 2 => pattern[1] == first && recursive(&pattern[2..], rest),
                    literal => literal == first && recursive(&pattern[1..], rest),
                },
            },
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5_000))]

        /// Goal: going back only to the last `*` finds every match the full search finds.
        /// Method: random patterns and texts over a small alphabet rich in pattern syntax.
        #[test]
        fn the_iterative_matcher_agrees_with_the_recursive_one(
            pattern in prop::collection::vec(prop::sample::select(b"ab*?[]^-\\".to_vec()), 0..9),
            text in prop::collection::vec(prop::sample::select(b"ab[]^-\\*".to_vec()), 0..9),
        ) {
            prop_assert_eq!(glob_match(&pattern, &text), recursive(&pattern, &text));
        }
    }

    #[test]
    fn a_pathological_pattern_is_cheap() {
        // Goal: a pattern that makes a recursive matcher explode runs in a blink here.
        let pattern = "*a".repeat(40) + "b";
        let text = "a".repeat(5_000);
        assert!(!glob_match(pattern.as_bytes(), text.as_bytes()));
    }
}
