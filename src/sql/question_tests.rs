//! The checks a question passes before any model is read: bounds, arities, value shapes per
//! data type, the URL form's bound and how caller text is shown.

use super::*;
use serde_json::{Value, json};

/// (data type, value, `Ok(bound text)` or `Err(part of the message)`).
#[rustfmt::skip]
const VALUES: &[(Option<DataType>, &str, Result<&str, &str>)] = &[
    // Text: strings and numbers, never booleans.
    (Some(DataType::String), r#""north""#, Ok("north")),
    (Some(DataType::String), "3", Ok("3")),
    (Some(DataType::String), "true", Err("is not a string")),
    (Some(DataType::Opaque), r#""blob""#, Ok("blob")),
    (Some(DataType::Opaque), "false", Err("is not a string")),
    (None, r#""x""#, Ok("x")),
    (None, "2.5", Ok("2.5")),
    (None, "true", Err("has no datatype")),
    // Integers: whole numbers that fit 64 bits, as numbers or text.
    (Some(DataType::Integer), "3", Ok("3")),
    (Some(DataType::Integer), r#""-7""#, Ok("-7")),
    (Some(DataType::Integer), "3.5", Err("is not an integer")),
    (Some(DataType::Integer), r#""9223372036854775808""#, Err("is not an integer")),
    (Some(DataType::Integer), "true", Err("is not an integer")),
    // Decimals: an optional sign, digits, at most one point with digits on one side at least.
    (Some(DataType::Decimal), "1.5", Ok("1.5")),
    (Some(DataType::Decimal), r#""-1.5""#, Ok("-1.5")),
    (Some(DataType::Decimal), r#""+2""#, Ok("+2")),
    (Some(DataType::Decimal), r#"".5""#, Ok(".5")),
    (Some(DataType::Decimal), r#""12""#, Ok("12")),
    (Some(DataType::Decimal), r#""5.""#, Err("is not a number")),
    (Some(DataType::Decimal), r#"".""#, Err("is not a number")),
    (Some(DataType::Decimal), r#""""#, Err("is not a number")),
    (Some(DataType::Decimal), r#""-""#, Err("is not a number")),
    (Some(DataType::Decimal), r#""1.2.3""#, Err("is not a number")),
    (Some(DataType::Decimal), r#""1e5""#, Err("is not a number")),
    (Some(DataType::Decimal), r#""a.5""#, Err("is not a number")),
    (Some(DataType::Decimal), r#""5.a""#, Err("is not a number")),
    (Some(DataType::Float), "2.5", Ok("2.5")),
    (Some(DataType::Float), r#""x""#, Err("is not a number")),
    // Booleans: true and false, as JSON or as text.
    (Some(DataType::Boolean), "true", Ok("true")),
    (Some(DataType::Boolean), "false", Ok("false")),
    (Some(DataType::Boolean), r#""true""#, Ok("true")),
    (Some(DataType::Boolean), r#""yes""#, Err("is not true or false")),
    (Some(DataType::Boolean), "1", Err("is not true or false")),
    // Dates: YYYY-MM-DD with a month 1-12 and a day 1-31.
    (Some(DataType::Date), r#""2026-01-02""#, Ok("2026-01-02")),
    (Some(DataType::Date), r#""2026-12-31""#, Ok("2026-12-31")),
    (Some(DataType::Date), r#""2026-01-01""#, Ok("2026-01-01")),
    (Some(DataType::Date), r#""2026-00-10""#, Err("is not a date (YYYY-MM-DD)")),
    (Some(DataType::Date), r#""2026-13-01""#, Err("is not a date")),
    (Some(DataType::Date), r#""2026-01-00""#, Err("is not a date")),
    (Some(DataType::Date), r#""2026-01-32""#, Err("is not a date")),
    (Some(DataType::Date), r#""2026-1-02""#, Err("is not a date")),
    (Some(DataType::Date), r#""2026-01-2""#, Err("is not a date")),
    (Some(DataType::Date), r#""26-01-02""#, Err("is not a date")),
    (Some(DataType::Date), r#""2026-01-02-03""#, Err("is not a date")),
    (Some(DataType::Date), r#""2026-01""#, Err("is not a date")),
    (Some(DataType::Date), r#""2026/01/02""#, Err("is not a date")),
    (Some(DataType::Date), r#""2026-0a-02""#, Err("is not a date")),
    // Times: HH:MM:SS below 24:00:00, with an optional fraction of digits.
    (Some(DataType::Time), r#""00:00:00""#, Ok("00:00:00")),
    (Some(DataType::Time), r#""23:59:59""#, Ok("23:59:59")),
    (Some(DataType::Time), r#""12:00:00.5""#, Ok("12:00:00.5")),
    (Some(DataType::Time), r#""24:00:00""#, Err("is not a time (HH:MM:SS)")),
    (Some(DataType::Time), r#""12:60:00""#, Err("is not a time")),
    (Some(DataType::Time), r#""12:00:60""#, Err("is not a time")),
    (Some(DataType::Time), r#""12:00:00.""#, Err("is not a time")),
    (Some(DataType::Time), r#""12:00:00.x""#, Err("is not a time")),
    (Some(DataType::Time), r#""12:00""#, Err("is not a time")),
    (Some(DataType::Time), r#""1:00:00""#, Err("is not a time")),
    (Some(DataType::Time), r#""12:00:00:00""#, Err("is not a time")),
    // Timestamps without an offset: a date, a space or T, a time; or a date alone.
    (Some(DataType::DateTime), r#""2026-01-02 03:04:05""#, Ok("2026-01-02 03:04:05")),
    (Some(DataType::DateTime), r#""2026-01-02T03:04:05.25""#, Ok("2026-01-02T03:04:05.25")),
    (Some(DataType::DateTime), r#""2026-01-02""#, Ok("2026-01-02")),
    (Some(DataType::DateTime), r#""2026-01-02 03:04:05Z""#, Err("is not a timestamp (YYYY-MM-DD HH:MM:SS)")),
    (Some(DataType::DateTime), r#""2026-01-02 03:04:05+01:00""#, Err("is not a timestamp")),
    (Some(DataType::DateTime), r#""2026-01-02 03:04:05-01:00""#, Err("is not a timestamp")),
    (Some(DataType::DateTime), r#""2026-13-02 03:04:05""#, Err("is not a timestamp")),
    (Some(DataType::DateTime), r#""2026-01-02 25:00:00""#, Err("is not a timestamp")),
    (Some(DataType::DateTime), r#""2026-13-02""#, Err("is not a timestamp")),
    // Timestamps with an offset: Z, ±HH:MM or ±HH.
    (Some(DataType::DateTimeTz), r#""2026-01-02T03:04:05+00:00""#, Ok("2026-01-02T03:04:05+00:00")),
    (Some(DataType::DateTimeTz), r#""2026-01-02 03:04:05Z""#, Ok("2026-01-02 03:04:05Z")),
    (Some(DataType::DateTimeTz), r#""2026-01-02T03:04:05-05:30""#, Ok("2026-01-02T03:04:05-05:30")),
    (Some(DataType::DateTimeTz), r#""2026-01-02T03:04:05+05""#, Ok("2026-01-02T03:04:05+05")),
    (Some(DataType::DateTimeTz), r#""2026-01-02T03:04:05""#, Err("is not a timestamp with offset")),
    (Some(DataType::DateTimeTz), r#""2026-01-02""#, Err("is not a timestamp with offset")),
    (Some(DataType::DateTimeTz), r#""2026-01-02T03:04:05+0530""#, Err("is not a timestamp with offset")),
    (Some(DataType::DateTimeTz), r#""2026-01-02T03:04:05+5:00""#, Err("is not a timestamp with offset")),
    (Some(DataType::DateTimeTz), r#""2026-01-02T03:04:05+05:0""#, Err("is not a timestamp with offset")),
    (Some(DataType::DateTimeTz), r#""2026-01-02T24:04:05Z""#, Err("is not a timestamp with offset")),
    (Some(DataType::DateTimeTz), r#""2026-00-02T03:04:05Z""#, Err("is not a timestamp with offset")),
    // No value of any type is null, a list or an object.
    (Some(DataType::String), "null", Err("use the is_null operator")),
    (None, "[1]", Err("not a list or object")),
    (Some(DataType::Integer), r#"{"a": 1}"#, Err("not a list or object")),
];

#[test]
fn each_data_type_takes_its_values_and_names_what_it_expects() {
    for (data_type, value, want) in VALUES {
        let value: Value = serde_json::from_str(value).unwrap();
        let got = bind_text(*data_type, &value);
        match (want, &got) {
            (Ok(text), Ok(bound)) => assert_eq!(bound, text, "{data_type:?} {value}"),
            (Err(says), Err(message)) => {
                assert!(message.contains(says), "{data_type:?} {value}: {message}")
            }
            _ => panic!("{data_type:?} {value}: want {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn a_value_holds_at_most_its_bound_in_bytes() {
    let at = json!("é".repeat(MAX_VALUE_BYTES / 2));
    assert!(bind_text(Some(DataType::String), &at).is_ok());
    let over = json!(format!("{}x", "é".repeat(MAX_VALUE_BYTES / 2)));
    let e = bind_text(Some(DataType::String), &over).unwrap_err();
    assert_eq!(
        e,
        format!("{} bytes; at most 4096 are allowed", MAX_VALUE_BYTES + 1)
    );
}

fn question(metrics: usize, dimensions: usize, filters: usize, order: usize) -> Question {
    Question {
        metrics: vec!["m".into(); metrics],
        dimensions: vec!["d.f".into(); dimensions],
        filters: vec![
            Filter {
                field: "d.f".into(),
                op: FilterOp::IsNull,
                values: vec![],
            };
            filters
        ],
        order: vec!["m".into(); order],
        limit: None,
    }
}

#[test]
fn each_count_is_allowed_up_to_its_bound() {
    let at = (
        MAX_METRICS,
        MAX_DIMENSIONS,
        MAX_FILTERS,
        MAX_METRICS + MAX_DIMENSIONS,
    );
    assert_eq!(question(at.0, at.1, at.2, at.3).check_shape(), Ok(()));
    for (q, parameter, says) in [
        (
            question(at.0 + 1, 0, 0, 0),
            "metrics",
            "51 entries; at most 50",
        ),
        (
            question(1, at.1 + 1, 0, 0),
            "dimensions",
            "21 entries; at most 20",
        ),
        (
            question(1, 0, at.2 + 1, 0),
            "filters",
            "51 entries; at most 50",
        ),
        (
            question(1, 0, 0, at.3 + 1),
            "order",
            "71 entries; at most 70",
        ),
        (question(0, 0, 0, 0), "metrics", "name at least one metric"),
    ] {
        let e = q.check_shape().unwrap_err();
        assert_eq!(
            (e.kind, e.parameter.as_str()),
            (ErrorKind::Invalid, parameter)
        );
        assert!(e.message.contains(says), "{e}");
    }
}

#[test]
fn a_limit_is_from_one_to_its_bound() {
    for (limit, ok) in [
        (0, false),
        (1, true),
        (MAX_LIMIT, true),
        (MAX_LIMIT + 1, false),
    ] {
        let q = Question {
            limit: Some(limit),
            ..question(1, 0, 0, 0)
        };
        match q.check_shape() {
            Ok(()) => assert!(ok, "{limit}"),
            Err(e) => {
                assert!(!ok, "{limit}: {e}");
                assert_eq!(e.parameter, "limit");
                assert!(
                    e.message.contains("give a limit from 1 to 1000000000"),
                    "{e}"
                );
            }
        }
    }
}

#[test]
fn each_operator_takes_its_number_of_values() {
    use FilterOp::*;
    #[rustfmt::skip]
    let cases = [
        (Eq, 1, "exactly one value"), (Ne, 1, "exactly one value"),
        (Lt, 1, "exactly one value"), (Le, 1, "exactly one value"),
        (Gt, 1, "exactly one value"), (Ge, 1, "exactly one value"),
        (Between, 2, "exactly 2 values"),
        (IsNull, 0, "no values"), (IsNotNull, 0, "no values"),
    ];
    for (op, n, takes) in cases {
        for given in [0, 1, 2, 3] {
            let mut q = question(1, 0, 1, 0);
            q.filters[0].op = op;
            q.filters[0].values = vec![json!(1); given];
            match q.check_shape() {
                Ok(()) => assert_eq!(given, n, "{op:?} with {given}"),
                Err(e) => {
                    assert_ne!(given, n, "{op:?} with {given}: {e}");
                    assert_eq!(e.parameter, "filters[0].values");
                    let want = format!(
                        "{given} values given; operator {} takes {takes}",
                        op_name(op)
                    );
                    assert_eq!(e.message, want);
                }
            }
        }
    }
    for op in [In, NotIn] {
        for (given, ok) in [
            (0, false),
            (1, true),
            (MAX_VALUES, true),
            (MAX_VALUES + 1, false),
        ] {
            let mut q = question(1, 0, 1, 0);
            q.filters[0].op = op;
            q.filters[0].values = vec![json!(1); given];
            let got = q.check_shape();
            assert_eq!(got.is_ok(), ok, "{op:?} with {given}: {got:?}");
            if let Err(e) = got {
                let want = format!(
                    "{given} values given; operator {} takes 1 to 1000 values",
                    op_name(op)
                );
                assert_eq!(e.message, want);
            }
        }
    }
}

#[test]
fn operators_are_named_as_the_question_writes_them() {
    use FilterOp::*;
    for op in [
        Eq, Ne, Lt, Le, Gt, Ge, In, NotIn, Between, IsNull, IsNotNull,
    ] {
        assert_eq!(json!(op), json!(op_name(op)));
    }
}

#[test]
fn grains_read_back_their_names() {
    for g in Grain::ALL {
        assert_eq!(Grain::parse(g.as_str()), Some(g));
        assert_eq!(json!(g), json!(g.as_str()));
    }
    assert_eq!(Grain::parse("hour"), None);
    assert_eq!(Grain::parse(""), None);
}

#[test]
fn the_url_form_holds_as_many_entries_as_a_question_may() {
    let at = vec!["metric=a"; MAX_QUERY_PAIRS].join("&");
    assert_eq!(Question::from_query(&at).unwrap().metrics.len(), 191);
    let over = format!("{at}&metric=a");
    let e = Question::from_query(&over).unwrap_err();
    assert_eq!(e.parameter, "query");
    assert_eq!(e.message, "192 entries; at most 191 are allowed");
}

#[test]
fn caller_text_is_shown_whole_up_to_64_characters() {
    let at = "é".repeat(64);
    assert_eq!(shown(&at), format!("{at:?}"));
    let over = format!("{at}x");
    assert_eq!(shown(&over), format!("{at:?}…"));
    assert_eq!(shown("a\nb"), "\"a\\nb\"");
}
