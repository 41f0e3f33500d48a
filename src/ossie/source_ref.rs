//! The Ossie source reference grammar: `catalog.schema.object`.
//!
//! A segment is either bare (no `.` or backtick) or quoted with backticks, where a doubled
//! backtick stands for one backtick and dots are literal: `` `a.b`.mart.`x``y` ``.

use std::fmt;

/// A parsed `catalog.schema.object` reference; every segment is non-empty.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceRef {
    pub catalog: String,
    pub schema: String,
    pub name: String,
}

/// Why a source reference does not parse. Positions are character offsets into the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceRefError {
    #[error("source is empty; expected catalog.schema.object")]
    Empty,
    #[error("expected exactly 3 segments (catalog.schema.object), found {found}")]
    SegmentCount { found: usize },
    #[error("segment {index} is empty (at character {at}); every segment needs a name")]
    EmptySegment { index: usize, at: usize },
    #[error("unterminated backtick quote starting at character {at}; close it with a backtick")]
    UnterminatedQuote { at: usize },
    #[error(
        "unexpected character {found:?} at character {at} after a closing backtick; expected '.' or the end"
    )]
    AfterQuote { found: char, at: usize },
    #[error(
        "backtick at character {at} inside an unquoted segment; quote the whole segment with backticks and double the backtick"
    )]
    StrayBacktick { at: usize },
}

impl SourceRef {
    pub fn new(
        catalog: impl Into<String>,
        schema: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            catalog: catalog.into(),
            schema: schema.into(),
            name: name.into(),
        }
    }

    /// Parses `catalog.schema.object` with Ossie backtick quoting.
    pub fn parse(input: &str) -> Result<Self, SourceRefError> {
        if input.is_empty() {
            return Err(SourceRefError::Empty);
        }
        let segments = split_segments(input)?;
        if segments.len() != 3 {
            return Err(SourceRefError::SegmentCount {
                found: segments.len(),
            });
        }
        let mut it = segments.into_iter();
        let (catalog, schema, name) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
        Ok(Self {
            catalog,
            schema,
            name,
        })
    }
}

/// Splits a dotted name (`catalog.schema`, `catalog.schema.model`, ...) into its segments,
/// unquoting as it goes; rejects empty segments.
pub fn split_segments(input: &str) -> Result<Vec<String>, SourceRefError> {
    let chars: Vec<char> = input.chars().collect();
    let mut segments = Vec::new();
    let mut i = 0;
    loop {
        let start = i;
        let mut segment = String::new();
        if chars.get(i) == Some(&'`') {
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(SourceRefError::UnterminatedQuote { at: start }),
                    Some('`') if chars.get(i + 1) == Some(&'`') => {
                        segment.push('`');
                        i += 2;
                    }
                    Some('`') => {
                        i += 1;
                        break;
                    }
                    Some(&c) => {
                        segment.push(c);
                        i += 1;
                    }
                }
            }
            match chars.get(i) {
                None | Some('.') => {}
                Some(&found) => return Err(SourceRefError::AfterQuote { found, at: i }),
            }
        } else {
            while let Some(&c) = chars.get(i) {
                match c {
                    '.' => break,
                    '`' => return Err(SourceRefError::StrayBacktick { at: i }),
                    _ => {
                        segment.push(c);
                        i += 1;
                    }
                }
            }
        }
        if segment.is_empty() {
            return Err(SourceRefError::EmptySegment {
                index: segments.len(),
                at: start,
            });
        }
        segments.push(segment);
        match chars.get(i) {
            None => return Ok(segments),
            Some('.') => i += 1, // a trailing dot leaves an empty segment, reported above
            Some(_) => unreachable!("segments end at a dot or the end"),
        }
    }
}

/// Formats one segment, quoting only when needed so plain names stay plain.
pub fn format_segment(segment: &str) -> String {
    if segment.contains(['.', '`']) {
        format!("`{}`", segment.replace('`', "``"))
    } else {
        segment.to_string()
    }
}

impl fmt::Display for SourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}.{}",
            format_segment(&self.catalog),
            format_segment(&self.schema),
            format_segment(&self.name)
        )
    }
}

impl std::str::FromStr for SourceRef {
    type Err = SourceRefError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_plain_and_quoted_forms() {
        let cases = [
            ("hr.public.employees", ("hr", "public", "employees")),
            ("`a.b`.mart.orders", ("a.b", "mart", "orders")),
            ("c.`we``ird`.t", ("c", "we`ird", "t")),
            ("c.s.`x.y.z`", ("c", "s", "x.y.z")),
            ("c.s.``````", ("c", "s", "``")),
            ("Ünï.cödé.名前", ("Ünï", "cödé", "名前")),
            ("c.s.with space", ("c", "s", "with space")),
            ("c.`s`.t", ("c", "s", "t")),
        ];
        for (input, (c, s, n)) in cases {
            assert_eq!(
                SourceRef::parse(input),
                Ok(SourceRef::new(c, s, n)),
                "{input}"
            );
        }
    }

    #[test]
    fn every_malformed_form_has_a_precise_error() {
        use SourceRefError::*;
        let cases = [
            ("", Empty),
            ("hr", SegmentCount { found: 1 }),
            ("hr.public", SegmentCount { found: 2 }),
            ("a.b.c.d", SegmentCount { found: 4 }),
            (".public.t", EmptySegment { index: 0, at: 0 }),
            ("hr..t", EmptySegment { index: 1, at: 3 }),
            ("hr.public.", EmptySegment { index: 2, at: 10 }),
            ("hr.``.t", EmptySegment { index: 1, at: 3 }),
            ("`hr.public.t", UnterminatedQuote { at: 0 }),
            ("hr.`pub``", UnterminatedQuote { at: 3 }),
            ("`hr`x.public.t", AfterQuote { found: 'x', at: 4 }),
            ("hr.pu`b.t", StrayBacktick { at: 5 }),
        ];
        for (input, want) in cases {
            assert_eq!(SourceRef::parse(input), Err(want.clone()), "{input:?}");
        }
    }

    #[test]
    fn formatting_quotes_only_segments_that_need_it() {
        assert_eq!(
            SourceRef::new("hr", "public", "employees").to_string(),
            "hr.public.employees"
        );
        assert_eq!(
            SourceRef::new("a.b", "mart", "orders").to_string(),
            "`a.b`.mart.orders"
        );
        assert_eq!(
            SourceRef::new("c", "we`ird", "t").to_string(),
            "c.`we``ird`.t"
        );
    }

    fn segment() -> impl Strategy<Value = String> {
        // Bias toward the characters the grammar cares about.
        proptest::collection::vec(
            prop_oneof![
                Just('.'),
                Just('`'),
                Just(' '),
                Just('é'),
                Just('😀'),
                any::<char>(),
                "[a-z_]".prop_map(|s| s.chars().next().unwrap())
            ],
            1..12,
        )
        .prop_map(|cs| cs.into_iter().collect())
    }

    proptest! {
        #[test]
        fn parse_inverts_format(c in segment(), s in segment(), n in segment()) {
            let r = SourceRef::new(c, s, n);
            prop_assert_eq!(SourceRef::parse(&r.to_string()), Ok(r));
        }

        #[test]
        fn format_inverts_parse_for_canonical_text(c in segment(), s in segment(), n in segment()) {
            let text = SourceRef::new(c, s, n).to_string();
            let reparsed = SourceRef::parse(&text).unwrap();
            prop_assert_eq!(reparsed.to_string(), text);
        }

        #[test]
        fn arbitrary_input_never_panics_and_ok_means_three_nonempty_segments(input in "[a-c.` ]{0,16}") {
            if let Ok(r) = SourceRef::parse(&input) {
                prop_assert!(!r.catalog.is_empty() && !r.schema.is_empty() && !r.name.is_empty());
                // Whatever parses, formats to something that parses to the same value.
                prop_assert_eq!(SourceRef::parse(&r.to_string()), Ok(r));
            }
        }
    }
}
