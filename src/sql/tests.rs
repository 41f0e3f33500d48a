use super::*;
use crate::crd::packed::MetricId;
use crate::crd::semantic_model::Definition;
use serde_json::json;

pub(super) fn field(name: &str, expr: &str, datatype: Option<&str>) -> serde_json::Value {
    let mut f = json!({"name": name, "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": expr}]}});
    if let Some(t) = datatype {
        f["datatype"] = json!(t);
    }
    f
}

pub(super) fn metric(name: &str, expr: &str) -> serde_json::Value {
    json!({"name": name, "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": expr}]}})
}

/// `def` with more metrics, (name, ANSI expression).
pub(super) fn with_metrics(mut def: Definition, metrics: &[(&str, &str)]) -> Definition {
    let ms = def.metrics.as_mut().unwrap();
    for (name, expr) in metrics {
        ms.push(serde_json::from_value(metric(name, expr)).unwrap());
    }
    def
}

/// A small shop: order lines → orders → customers, order lines → products.
pub(super) fn shop() -> Definition {
    serde_json::from_value(json!({
        "datasets": [
            {"name": "customers", "source": "shop.sales.customers", "primaryKey": ["id"], "fields": [
                field("id", "id", Some("Integer")),
                field("region", "region", Some("String")),
                field("signed_up", "signed_up_on", Some("Date")),
                field("vip", "is_vip", Some("Boolean")),
            ]},
            {"name": "orders", "source": "shop.sales.orders", "primaryKey": ["order_id"], "fields": [
                field("order_id", "order_id", Some("Integer")),
                field("ordered_at", "ordered_at", Some("DateTime")),
                field("amount", "amount", Some("Decimal")),
                field("status", "UPPER(status)", Some("String")),
            ]},
            {"name": "lines", "source": "shop.sales.order_lines", "fields": [
                field("quantity", "quantity", Some("Integer")),
                field("net", "quantity * unit_price", Some("Decimal")),
            ]},
            {"name": "products", "source": "shop.sales.products", "primaryKey": ["sku"], "fields": [
                field("category", "category", Some("String")),
            ]},
            {"name": "visits", "source": "shop.web.visits", "fields": [
                field("at", "visited_at", Some("DateTime")),
            ]}
        ],
        "relationships": [
            {"name": "order_customer", "from": "orders", "to": "customers", "fromColumns": ["customer_id"], "toColumns": ["id"]},
            {"name": "line_order", "from": "lines", "to": "orders", "fromColumns": ["order_id"], "toColumns": ["order_id"]},
            {"name": "line_product", "from": "lines", "to": "products", "fromColumns": ["sku"], "toColumns": ["sku"]}
        ],
        "metrics": [
            metric("revenue", "SUM(orders.amount)"),
            metric("orders", "COUNT(orders.order_id)"),
            metric("buyers", "COUNT(DISTINCT customers.id)"),
            metric("units", "SUM(lines.quantity)"),
            metric("net_sales", "SUM(lines.net)"),
            metric("average_order", "revenue / orders"),
            metric("net_per_order", "net_sales / orders"),
            metric("uplift", "net_per_order - average_order"),
            metric("visits", "COUNT(visits.at)")
        ]
    }))
    .unwrap()
}

fn ids(def: &Definition) -> Vec<MetricIdentity> {
    def.metrics
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, m)| {
            MetricIdentity::new(
                m.name.clone(),
                MetricId::from_uuid(format!("0192f3a0-0000-7000-8000-{i:012}").parse().unwrap()),
            )
        })
        .collect()
}

pub(super) fn ask(
    def: &Definition,
    q: serde_json::Value,
    target: Target,
) -> Result<Compiled, QueryError> {
    let q: Question = serde_json::from_value(q).unwrap();
    let ids = ids(def);
    compile(
        Model {
            definition: def,
            revision: 7,
            metric_ids: &ids,
            sources: &[],
        },
        &q,
        target,
    )
}

#[test]
fn one_dataset_by_a_joined_dimension_and_a_month() {
    let c = ask(
        &shop(),
        json!({"metrics": ["revenue", "orders"], "dimensions": ["customers.region", "orders.ordered_at:month"],
               "filters": [{"field": "customers.vip", "op": "eq", "values": [true]}],
               "order": ["-revenue"], "limit": 10}),
        Target::Postgres,
    )
    .unwrap();
    assert_eq!(
        c.sql,
        "SELECT\n  \"customers\".\"region\" AS \"customers__region\",\n  \
         CAST(DATE_TRUNC('month', \"orders\".\"ordered_at\") AS DATE) AS \"orders__ordered_at__month\",\n  \
         SUM((\"orders\".\"amount\")) AS \"revenue\",\n  COUNT((\"orders\".\"order_id\")) AS \"orders\"\n\
         FROM \"sales\".\"orders\" AS \"orders\"\n\
         LEFT OUTER JOIN \"sales\".\"customers\" AS \"customers\" ON \"orders\".\"customer_id\" = \"customers\".\"id\"\n\
         WHERE \"customers\".\"is_vip\" = CAST($1 AS BOOLEAN)\n\
         GROUP BY \"customers\".\"region\", CAST(DATE_TRUNC('month', \"orders\".\"ordered_at\") AS DATE)\n\
         ORDER BY \"revenue\" DESC, \"customers__region\", \"orders__ordered_at__month\"\n\
         LIMIT 10"
    );
    assert_eq!(
        c.parameters,
        vec![Parameter {
            data_type: "boolean",
            value: "true".into()
        }]
    );
    assert_eq!(c.revision, 7);
    assert_eq!(
        c.metrics.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        [
            "0192f3a0-0000-7000-8000-000000000000",
            "0192f3a0-0000-7000-8000-000000000001"
        ]
    );
    assert_eq!(
        c.paths,
        vec![MetricPath {
            dataset: "orders".into(),
            joins: vec![JoinStep {
                relationship: "order_customer".into(),
                from: "orders".into(),
                to: "customers".into()
            }]
        }]
    );
    assert_eq!(
        c.columns,
        [
            "customers__region",
            "orders__ordered_at__month",
            "revenue",
            "orders"
        ]
    );
}

#[test]
fn metrics_of_two_datasets_are_aggregated_apart_then_combined() {
    let c = ask(
        &shop(),
        json!({"metrics": ["revenue", "units"], "dimensions": ["customers.region"]}),
        Target::Mysql,
    )
    .unwrap();
    // Units are summed over order lines joined up to customers; revenue over orders alone. The
    // revenue of an order with three lines is counted once.
    assert!(c.sql.contains("UNION ALL"), "{}", c.sql);
    assert!(
        c.sql.contains("MAX(`u`.`revenue`) AS `revenue`"),
        "{}",
        c.sql
    );
    assert!(
        c.sql.contains(
            "FROM `sales`.`order_lines` AS `lines`\n    LEFT OUTER JOIN `sales`.`orders` AS `orders` ON `lines`.`order_id` = `orders`.`order_id`\n    LEFT OUTER JOIN `sales`.`customers` AS `customers`"
        ),
        "{}",
        c.sql
    );
    assert_eq!(c.paths.len(), 2);
    assert_eq!(c.paths[1].joins.len(), 2);
}

#[test]
fn a_derived_metric_divides_in_double_precision_and_names_what_it_uses() {
    let c = ask(&shop(), json!({"metrics": ["uplift"]}), Target::Postgres).unwrap();
    assert!(
        c.sql.contains("CAST(\"q\".\"net_sales\" AS DOUBLE PRECISION) / CAST(\"q\".\"orders\" AS DOUBLE PRECISION)"),
        "{}",
        c.sql
    );
    assert_eq!(c.metrics[0].uses, ["net_sales", "orders", "revenue"]);
    assert_eq!(c.columns, ["uplift"]);
}

#[test]
fn a_derived_metric_that_does_not_divide_keeps_its_types() {
    let def = with_metrics(shop(), &[("gross_and_net", "revenue + net_sales")]);
    let c = ask(
        &def,
        json!({"metrics": ["gross_and_net"]}),
        Target::Postgres,
    )
    .unwrap();
    assert!(
        c.sql.contains("\"q\".\"revenue\" + \"q\".\"net_sales\"") && !c.sql.contains("CAST("),
        "{}",
        c.sql
    );
}

#[test]
fn grains_use_each_dialects_date_functions() {
    for (grain, pg, my) in [
        ("day", "DATE_TRUNC('day'", "DATE(`orders`.`ordered_at`)"),
        (
            "week",
            "DATE_TRUNC('week'",
            "INTERVAL WEEKDAY(`orders`.`ordered_at`) DAY",
        ),
        (
            "month",
            "DATE_TRUNC('month'",
            "INTERVAL (DAYOFMONTH(`orders`.`ordered_at`) - 1) DAY",
        ),
        (
            "quarter",
            "DATE_TRUNC('quarter'",
            "INTERVAL (QUARTER(`orders`.`ordered_at`) - 1) QUARTER",
        ),
        (
            "year",
            "DATE_TRUNC('year'",
            "MAKEDATE(YEAR(`orders`.`ordered_at`), 1)",
        ),
    ] {
        let q =
            json!({"metrics": ["revenue"], "dimensions": [format!("orders.ordered_at:{grain}")]});
        assert!(
            ask(&shop(), q.clone(), Target::Postgres)
                .unwrap()
                .sql
                .contains(pg)
        );
        assert!(
            ask(&shop(), q, Target::Mysql).unwrap().sql.contains(my),
            "{grain}"
        );
    }
}

#[test]
fn refusals_name_the_part_of_the_question_and_the_fix() {
    let def = shop();
    for (q, kind, parameter, says) in [
        (
            json!({"metrics": []}),
            ErrorKind::Invalid,
            "metrics",
            "at least one",
        ),
        (
            json!({"metrics": ["profit"]}),
            ErrorKind::Unknown,
            "metrics[0]",
            "unknown metric \"profit\"",
        ),
        (
            json!({"metrics": ["revenue", "revenue"]}),
            ErrorKind::Invalid,
            "metrics[1]",
            "twice",
        ),
        (
            json!({"metrics": ["revenue"], "dimensions": ["orders.nope"]}),
            ErrorKind::Unknown,
            "dimensions[0]",
            "dataset orders has fields",
        ),
        (
            json!({"metrics": ["revenue"], "dimensions": ["nope.region"]}),
            ErrorKind::Unknown,
            "dimensions[0]",
            "no dataset \"nope\"",
        ),
        (
            json!({"metrics": ["revenue"], "dimensions": ["customers.region:month"]}),
            ErrorKind::WrongType,
            "dimensions[0]",
            "needs a date or timestamp",
        ),
        (
            json!({"metrics": ["revenue"], "dimensions": ["orders.ordered_at:hour"]}),
            ErrorKind::Invalid,
            "dimensions[0]",
            "unknown grain \"hour\"",
        ),
        (
            json!({"metrics": ["revenue"], "dimensions": ["lines.quantity"]}),
            ErrorKind::Unreachable,
            "dimensions[0]",
            "count them more than once",
        ),
        (
            json!({"metrics": ["revenue"], "dimensions": ["visits.at"]}),
            ErrorKind::Unreachable,
            "dimensions[0]",
            "no relationship connects",
        ),
        (
            json!({"metrics": ["revenue"], "filters": [{"field": "orders.amount", "op": "gt", "values": ["a lot"]}]}),
            ErrorKind::WrongType,
            "filters[0].values[0]",
            "is not a number",
        ),
        (
            json!({"metrics": ["revenue"], "filters": [{"field": "customers.signed_up", "op": "ge", "values": ["2024-13-01"]}]}),
            ErrorKind::WrongType,
            "filters[0].values[0]",
            "a date",
        ),
        (
            json!({"metrics": ["revenue"], "filters": [{"field": "customers.id", "op": "eq", "values": [null]}]}),
            ErrorKind::WrongType,
            "filters[0].values[0]",
            "is_null",
        ),
        (
            json!({"metrics": ["revenue"], "filters": [{"field": "customers.id", "op": "between", "values": [1]}]}),
            ErrorKind::Invalid,
            "filters[0].values",
            "exactly 2 values",
        ),
        (
            json!({"metrics": ["revenue"], "filters": [{"field": "customers.id", "op": "in", "values": []}]}),
            ErrorKind::Invalid,
            "filters[0].values",
            "1 to 1000",
        ),
        (
            json!({"metrics": ["revenue"], "order": ["buyers"]}),
            ErrorKind::Invalid,
            "order[0]",
            "not a requested",
        ),
        (
            json!({"metrics": ["revenue"], "limit": 0}),
            ErrorKind::Invalid,
            "limit",
            "out of range",
        ),
    ] {
        let e = ask(&def, q.clone(), Target::Postgres).unwrap_err();
        assert_eq!(
            (e.kind, e.parameter.as_str()),
            (kind, parameter),
            "{q}: {e}"
        );
        assert!(e.message.contains(says), "{q}: {e}");
    }
}

#[test]
fn caller_text_in_an_error_is_quoted_escaped_and_bounded() {
    let hostile = format!("x\n\u{1b}[31m{}", "y".repeat(500));
    for q in [
        json!({"metrics": [hostile]}),
        json!({"metrics": ["revenue"], "dimensions": [hostile]}),
        json!({"metrics": ["revenue"], "dimensions": [format!("orders.ordered_at:{hostile}")]}),
        json!({"metrics": ["revenue"], "order": [hostile]}),
    ] {
        let e = ask(&shop(), q.clone(), Target::Postgres).unwrap_err();
        assert!(
            !e.message.contains('\n') && !e.message.contains('\u{1b}'),
            "{e}"
        );
        assert!(!e.message.contains(&"y".repeat(65)), "{e}");
        assert!(e.message.contains("\"x\\n\\u{1b}[31myyy"), "{e}");
    }
}

#[test]
fn two_equally_short_paths_are_named_and_refused() {
    let mut def = shop();
    def.relationships.as_mut().unwrap().push(
        serde_json::from_value(
            json!({"name": "order_referrer", "from": "orders", "to": "customers",
            "fromColumns": ["referred_by"], "toColumns": ["id"]}),
        )
        .unwrap(),
    );
    let e = ask(
        &def,
        json!({"metrics": ["revenue"], "dimensions": ["customers.region"]}),
        Target::Postgres,
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unreachable);
    assert!(e.message.contains("[order_customer]"), "{e}");
    assert!(e.message.contains("[order_referrer]"), "{e}");
}

#[test]
fn model_expressions_the_compiler_cannot_use_are_named() {
    for (expr, says) in [
        ("SUM(amount)", "names no dataset"),
        ("COUNT(*)", "names no dataset"),
        (
            "SUM(orders.amount) + orders.amount",
            "outside every aggregate",
        ),
        (
            "SUM(orders.amount * customers.id)",
            "datasets orders and customers",
        ),
        ("SUM(SUM(orders.amount))", "nests one aggregate"),
        (
            "SUM(shop.orders.amount)",
            "names `shop.orders.amount`; write dataset.field",
        ),
        ("SUM(orders.amount) OVER ()", "window"),
        ("(SELECT 1)", "subquery"),
        ("revenue / nothing", "neither an aggregate"),
        ("SUM(orders.amount) )", "unexpected"),
    ] {
        let mut def = shop();
        def.metrics
            .as_mut()
            .unwrap()
            .push(serde_json::from_value(metric("broken", expr)).unwrap());
        let e = ask(&def, json!({"metrics": ["broken"]}), Target::Postgres).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Model, "{expr}: {e}");
        assert!(e.message.contains(says), "{expr}: {e}");
    }
}

#[test]
fn derived_metrics_in_a_circle_are_refused() {
    let def = with_metrics(shop(), &[("a", "b + 1"), ("b", "a + 1")]);
    let e = ask(&def, json!({"metrics": ["a"]}), Target::Postgres).unwrap_err();
    assert!(e.message.contains("a → b → a"), "{e}");
}

#[test]
fn identifiers_are_quoted_and_folded_per_dialect() {
    let mut def = shop();
    def.datasets[3].fields.as_mut().unwrap()[0] = serde_json::from_value(field(
        "category",
        "\"Cat\"\"egory\" || Name",
        Some("String"),
    ))
    .unwrap();
    let q = json!({"metrics": ["units"], "dimensions": ["products.category"]});
    let pg = ask(&def, q.clone(), Target::Postgres).unwrap().sql;
    assert!(
        pg.contains("\"products\".\"Cat\"\"egory\" || \"products\".\"name\""),
        "{pg}"
    );
    let my = ask(&def, q.clone(), Target::Mysql).unwrap().sql;
    assert!(
        my.contains("`products`.`Cat\"egory` || `products`.`Name`"),
        "{my}"
    );
    let ansi = ask(&def, q, Target::Ansi).unwrap().sql;
    assert!(
        ansi.contains("\"products\".\"Cat\"\"egory\" || \"products\".Name"),
        "{ansi}"
    );
}

#[test]
fn resolved_sources_name_the_tables() {
    let def = shop();
    let ids = ids(&def);
    let sources: Vec<SourceAssociation> = vec![serde_json::from_value(json!({
        "dataset": "orders", "source": {"catalog": "shop", "schema": "sales", "name": "orders_v2"},
        "type": "TABLE", "id": "1", "revision": 1
    }))
    .unwrap()];
    let q: Question = serde_json::from_value(json!({"metrics": ["revenue"]})).unwrap();
    let c = compile(
        Model {
            definition: &def,
            revision: 1,
            metric_ids: &ids,
            sources: &sources,
        },
        &q,
        Target::Postgres,
    )
    .unwrap();
    assert!(
        c.sql.contains("FROM \"sales\".\"orders_v2\" AS \"orders\""),
        "{}",
        c.sql
    );
}

#[test]
fn the_catalogs_read_are_those_of_the_datasets_the_sql_reads() {
    let def = shop();
    let ids = ids(&def);
    // orders resolved into another catalog than its definition names; customers as written.
    let sources: Vec<SourceAssociation> = vec![serde_json::from_value(json!({
        "dataset": "orders", "source": {"catalog": "moved", "schema": "sales", "name": "orders"},
        "type": "TABLE", "id": "1", "revision": 1
    }))
    .unwrap()];
    let model = Model {
        definition: &def,
        revision: 1,
        metric_ids: &ids,
        sources: &sources,
    };
    for (q, want) in [
        (json!({"metrics": ["revenue"]}), vec!["moved"]),
        (
            json!({"metrics": ["revenue"], "dimensions": ["customers.region"]}),
            vec!["moved", "shop"],
        ),
        (json!({"metrics": ["buyers"]}), vec!["shop"]),
    ] {
        let q: Question = serde_json::from_value(q).unwrap();
        assert_eq!(
            compile(model, &q, Target::Ansi).unwrap().catalogs,
            want,
            "{q:?}"
        );
    }

    // Nothing resolved yet: each dataset's own definition names its catalog.
    let mut def = shop();
    def.datasets
        .iter_mut()
        .find(|d| d.name == "customers")
        .unwrap()
        .source = "crm.sales.customers".into();
    let ids = self::ids(&def);
    let model = Model {
        definition: &def,
        revision: 1,
        metric_ids: &ids,
        sources: &[],
    };
    for (q, want) in [
        (json!({"metrics": ["revenue"]}), vec!["shop"]),
        (
            json!({"metrics": ["revenue"], "dimensions": ["customers.region"]}),
            vec!["crm", "shop"],
        ),
    ] {
        let q: Question = serde_json::from_value(q).unwrap();
        assert_eq!(
            compile(model, &q, Target::Ansi).unwrap().catalogs,
            want,
            "{q:?}"
        );
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;
    use sqlparser::dialect::{GenericDialect, MySqlDialect, PostgreSqlDialect};
    use sqlparser::parser::Parser;
    use sqlparser::tokenizer::{Token, Tokenizer};

    /// Hostile text: quotes, comments, semicolons, placeholders.
    fn hostile() -> impl Strategy<Value = String> {
        "[a-z'\";\\-/*$?` ]{1,12}".prop_map(|s| format!("x{s}"))
    }

    fn value_for(t: &str) -> BoxedStrategy<serde_json::Value> {
        match t {
            "Integer" => any::<i64>().prop_map(|n| json!(n)).boxed(),
            "Decimal" => (any::<i32>(), 0u32..1000)
                .prop_map(|(a, b)| json!(format!("{a}.{b}")))
                .boxed(),
            "Date" => (1990u32..2030, 1u32..13, 1u32..29)
                .prop_map(|(y, m, d)| json!(format!("{y}-{m:02}-{d:02}")))
                .boxed(),
            "Boolean" => any::<bool>().prop_map(|b| json!(b)).boxed(),
            // `~` appears in no name, so a value found in the SQL came from the caller.
            _ => hostile().prop_map(|s| json!(format!("~{s}"))).boxed(),
        }
    }

    /// Random chain-and-star models: dataset i references some earlier dataset.
    fn model() -> impl Strategy<Value = Definition> {
        (2usize..8)
            .prop_flat_map(|n| {
                (
                    Just(n),
                    proptest::collection::vec(any::<prop::sample::Index>(), n),
                    proptest::collection::vec(prop::sample::select(vec!["Integer", "Decimal", "Date", "Boolean", "String"]), n),
                    proptest::collection::vec(hostile(), n),
                )
            })
            .prop_map(|(n, parents, types, names)| {
                let datasets: Vec<serde_json::Value> = (0..n)
                    .map(|i| {
                        json!({"name": format!("d{i}"), "source": format!("c.s{i}.t{i}"), "fields": [
                            field("k", "k", Some("Integer")),
                            field("v", &format!("\"{}\"", names[i].replace('"', "\"\"")), Some(types[i])),
                            field("t", "created", Some("DateTime")),
                        ]})
                    })
                    .collect();
                let relationships: Vec<serde_json::Value> = (1..n)
                    .map(|i| {
                        let to = parents[i].index(i);
                        json!({"name": format!("r{i}"), "from": format!("d{i}"), "to": format!("d{to}"),
                               "fromColumns": [format!("p{to}")], "toColumns": ["k"]})
                    })
                    .collect();
                let mut metrics: Vec<serde_json::Value> = (0..n)
                    .flat_map(|i| {
                        [
                            metric(&format!("sum{i}"), &format!("SUM(d{i}.k)")),
                            metric(&format!("cnt{i}"), &format!("COUNT(DISTINCT d{i}.v)")),
                        ]
                    })
                    .collect();
                metrics.push(metric("ratio", "sum0 / cnt1"));
                serde_json::from_value(json!({"datasets": datasets, "relationships": relationships, "metrics": metrics}))
                    .unwrap()
            })
    }

    fn question(
        def: &Definition,
    ) -> impl Strategy<Value = (serde_json::Value, Vec<String>)> + use<> {
        let n = def.datasets.len();
        let types: Vec<String> = def
            .datasets
            .iter()
            .map(|d| format!("{:?}", d.fields.as_ref().unwrap()[1].datatype.unwrap()))
            .collect();
        let metric_names: Vec<String> = def
            .metrics
            .iter()
            .flatten()
            .map(|m| m.name.to_string())
            .collect();
        (
            proptest::collection::btree_set(prop::sample::select(metric_names), 1..4),
            proptest::collection::btree_set(0..n, 0..3),
            any::<bool>(),
            0..n,
            proptest::collection::vec(any::<prop::sample::Index>(), 1..3),
            prop::option::of(1u64..100),
        )
            .prop_flat_map(move |(metrics, dims, grain, fd, _, limit)| {
                let t = types[fd].clone();
                (
                    Just((metrics.clone(), dims.clone(), grain, fd, limit)),
                    proptest::collection::vec(value_for(&t), 1..4),
                )
            })
            .prop_map(|((metrics, dims, grain, fd, limit), values)| {
                let mut dimensions: Vec<String> = dims.iter().map(|d| format!("d{d}.v")).collect();
                if grain {
                    dimensions.push("d0.t:quarter".into());
                }
                let texts: Vec<String> = values
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect();
                let q = json!({
                    "metrics": metrics,
                    "dimensions": dimensions,
                    "filters": [{"field": format!("d{fd}.v"), "op": "in", "values": values}],
                    "order": [format!("-{}", metrics.iter().next().unwrap())],
                    "limit": limit,
                });
                (q, texts)
            })
    }

    /// Whatever compiles parses in its dialect, binds every placeholder, and carries no caller
    /// text into the SQL; most random questions compile (the rest ask across a fan-out).
    #[test]
    fn compiled_sql_parses_binds_everything_and_holds_no_caller_text() {
        let compiled = std::cell::Cell::new(0usize);
        let cases = 300;
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(cases));
        let strategy = model().prop_flat_map(|d| {
            let q = question(&d);
            (Just(d), q)
        });
        let result = runner.run(&strategy, |(def, (q, texts))| {
            for target in [Target::Postgres, Target::Mysql, Target::Ansi] {
                match ask(&def, q.clone(), target) {
                    Ok(c) => {
                        compiled.set(compiled.get() + 1);
                        let parsed = match target {
                            Target::Postgres => Parser::parse_sql(&PostgreSqlDialect {}, &c.sql),
                            Target::Mysql => Parser::parse_sql(&MySqlDialect {}, &c.sql),
                            Target::Ansi => Parser::parse_sql(&GenericDialect {}, &c.sql),
                        };
                        prop_assert!(parsed.is_ok(), "{:?}\n{}", parsed.err(), c.sql);
                        prop_assert_eq!(parsed.unwrap().len(), 1);
                        // Placeholders as the dialect's tokenizer sees them (a `?` inside a quoted
                        // name is none); PostgreSQL numbers each parameter once.
                        let tokens = match target {
                            Target::Postgres => {
                                Tokenizer::new(&PostgreSqlDialect {}, &c.sql).tokenize()
                            }
                            Target::Mysql => Tokenizer::new(&MySqlDialect {}, &c.sql).tokenize(),
                            Target::Ansi => Tokenizer::new(&GenericDialect {}, &c.sql).tokenize(),
                        }
                        .unwrap();
                        let mut placeholders: Vec<String> = tokens
                            .into_iter()
                            .filter_map(|t| match t {
                                Token::Placeholder(p) => Some(p),
                                _ => None,
                            })
                            .collect();
                        if target == Target::Postgres {
                            placeholders.sort();
                            placeholders.dedup();
                            let mut want: Vec<String> =
                                (1..=c.parameters.len()).map(|n| format!("${n}")).collect();
                            want.sort();
                            prop_assert_eq!(&placeholders, &want);
                        }
                        prop_assert_eq!(placeholders.len(), c.parameters.len());
                        for t in &texts {
                            prop_assert!(c.parameters.iter().any(|p| &p.value == t));
                            prop_assert!(!c.sql.contains(t.as_str()), "{t} in {}", c.sql);
                        }
                    }
                    // Only unreachable dimensions or filters may refuse these questions.
                    Err(e) => prop_assert_eq!(e.kind, ErrorKind::Unreachable, "{}", e),
                }
            }
            Ok(())
        });
        result.unwrap();
        // Three dialects per case; about a fifth of the cases reach every dimension.
        assert!(
            compiled.get() > cases as usize / 2,
            "only {} compiled",
            compiled.get()
        );
    }
}

mod url_form {
    use super::*;
    use crate::sql::{FilterOp, Question};
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        // Separators of the query string and of lists, JSON's own characters, non-ASCII.
        "[a-z,&=+%#?;:\"'\\[\\]{} ü\u{1F600}.-]{0,16}"
    }

    fn op() -> impl Strategy<Value = FilterOp> {
        prop::sample::select(vec![
            FilterOp::Eq,
            FilterOp::In,
            FilterOp::Between,
            FilterOp::IsNull,
            FilterOp::NotIn,
        ])
    }

    fn question() -> impl Strategy<Value = Question> {
        let filter = (
            text(),
            op(),
            proptest::collection::vec(
                prop_oneof![
                    text().prop_map(|s| json!(s)),
                    any::<i64>().prop_map(|n| json!(n)),
                    any::<bool>().prop_map(|b| json!(b))
                ],
                0..4,
            ),
        )
            .prop_map(|(field, op, values)| crate::sql::Filter { field, op, values });
        (
            proptest::collection::vec(text(), 0..5),
            proptest::collection::vec(text(), 0..5),
            proptest::collection::vec(filter, 0..4),
            proptest::collection::vec(text(), 0..3),
            proptest::option::of(any::<u64>()),
        )
            .prop_map(|(metrics, dimensions, filters, order, limit)| Question {
                metrics,
                dimensions,
                filters,
                order,
                limit,
            })
    }

    proptest! {
        #[test]
        fn a_question_survives_its_url_form(q in question()) {
            prop_assert_eq!(Question::from_query(&q.to_query()).unwrap(), q);
        }
    }

    #[test]
    fn a_bad_url_form_is_refused_naming_the_entry() {
        for (query, parameter, says) in [
            (
                "metric=a&metrics=b",
                "query",
                "unknown parameter \"metrics\"",
            ),
            ("metric=a&filter=%7Bnope", "filters[0]", "not JSON"),
            (
                "metric=a&filter=%7B%22field%22%3A%22x%22%7D",
                "filters[0]",
                "missing or unknown key",
            ),
            ("metric=a&limit=ten", "limit", "whole number"),
            ("metric=a&limit=1&limit=2", "limit", "given twice"),
        ] {
            let e = Question::from_query(query).unwrap_err();
            assert_eq!(
                (e.kind, e.parameter.as_str()),
                (ErrorKind::Invalid, parameter),
                "{query}: {e}"
            );
            assert!(e.message.contains(says), "{query}: {e}");
        }
        let many = vec!["metric=a"; 400].join("&");
        assert_eq!(Question::from_query(&many).unwrap_err().parameter, "query");
    }
}

#[test]
fn unquoted_names_resolve_without_case_and_quoted_ones_exactly() {
    // lines.net is `quantity * unit_price`: a name that resolves to the field reads both.
    let field = "SUM((\"lines\".\"quantity\" * \"lines\".\"unit_price\"))";
    for (expr, want) in [
        ("SUM(LINES.NET)", Ok(field)),
        ("SUM(\"lines\".\"net\")", Ok(field)),
        // A quoted name that matches no field exactly is the source's own column.
        ("SUM(lines.\"NET\")", Ok("SUM(\"lines\".\"NET\")")),
        // Also when the dataset has one field only (no second candidate to make it ambiguous).
        (
            "COUNT(products.\"CATEGORY\")",
            Ok("COUNT(\"products\".\"CATEGORY\")"),
        ),
        ("SUM(\"LINES\".net)", Err("names no dataset")),
    ] {
        compiles_to(shop(), expr, expr, want);
    }
}

#[test]
fn a_field_may_qualify_its_own_dataset_and_no_other() {
    for (expr, want) in [
        ("orders.amount * 2", Ok("SUM((\"orders\".\"amount\" * 2))")),
        (
            "customers.id",
            Err("a field reads only columns of its own dataset"),
        ),
        ("SUM(amount)", Err("a field is a row-level value")),
    ] {
        let mut def = shop();
        let orders = &mut def.datasets[1];
        let mut fields = orders.fields.take().unwrap().into_vec();
        fields.push(serde_json::from_value(field("double", expr, Some("Decimal"))).unwrap());
        orders.fields = Some(fields.into());
        compiles_to(def, "SUM(orders.double)", expr, want);
    }
}

/// Compiles metric `probe` (`expr`) added to `def`: the SQL contains `want`'s text, or the
/// refusal says it; `case` names the table row in a failure.
fn compiles_to(mut def: Definition, expr: &str, case: &str, want: Result<&str, &str>) {
    def.metrics
        .as_mut()
        .unwrap()
        .push(serde_json::from_value(metric("probe", expr)).unwrap());
    let got = ask(&def, json!({"metrics": ["probe"]}), Target::Postgres);
    match (want, got) {
        (Ok(sql), Ok(c)) => assert!(c.sql.contains(sql), "{case}: {}", c.sql),
        (Err(says), Err(e)) => assert!(e.message.contains(says), "{case}: {e}"),
        (want, got) => panic!("{case}: wanted {want:?}, got {:?}", got.map(|c| c.sql)),
    }
}

/// One filter on a field of each type, in each dialect: the cast around the placeholder and
/// the value bound to it.
#[test]
fn every_type_binds_with_each_dialects_cast_and_value() {
    let types = [
        ("String", json!("north")),
        ("Integer", json!(3)),
        ("Decimal", json!(1.5)),
        ("Float", json!(2.5)),
        ("Boolean", json!(true)),
        ("Boolean", json!(false)),
        ("Date", json!("2026-01-02")),
        ("Time", json!("12:30:00")),
        ("DateTime", json!("2026-01-02 03:04:05")),
        ("DateTimeTz", json!("2026-01-02T03:04:05+00:00")),
        ("Opaque", json!("blob")),
    ];
    let fields: Vec<_> = types
        .iter()
        .map(|(t, _)| field(&t.to_lowercase(), &t.to_lowercase(), Some(t)))
        .collect();
    let def: Definition = serde_json::from_value(json!({
        "datasets": [{"name": "e", "source": "db.s.e", "fields": fields}],
        "metrics": [metric("n", "COUNT(e.integer)")]
    }))
    .unwrap();
    #[rustfmt::skip]
    let want = [
        // (type, value, PostgreSQL placeholder, ANSI placeholder, MySQL bound value, bound type)
        ("String", "north", "$1", "?", "north", "string"),
        ("Integer", "3", "CAST($1 AS BIGINT)", "CAST(? AS BIGINT)", "3", "integer"),
        ("Decimal", "1.5", "CAST($1 AS NUMERIC)", "CAST(? AS NUMERIC)", "1.5", "decimal"),
        ("Float", "2.5", "CAST($1 AS DOUBLE PRECISION)", "CAST(? AS DOUBLE PRECISION)", "2.5", "float"),
        ("Boolean", "true", "CAST($1 AS BOOLEAN)", "CAST(? AS BOOLEAN)", "1", "boolean"),
        ("Boolean", "false", "CAST($1 AS BOOLEAN)", "CAST(? AS BOOLEAN)", "0", "boolean"),
        ("Date", "2026-01-02", "CAST($1 AS DATE)", "CAST(? AS DATE)", "2026-01-02", "date"),
        ("Time", "12:30:00", "CAST($1 AS TIME)", "CAST(? AS TIME)", "12:30:00", "time"),
        ("DateTime", "2026-01-02 03:04:05", "CAST($1 AS TIMESTAMP)", "CAST(? AS TIMESTAMP)", "2026-01-02 03:04:05", "datetime"),
        ("DateTimeTz", "2026-01-02T03:04:05+00:00", "CAST($1 AS TIMESTAMPTZ)", "CAST(? AS TIMESTAMP WITH TIME ZONE)", "2026-01-02T03:04:05+00:00", "datetimetz"),
        ("Opaque", "blob", "$1", "?", "blob", "string"),
    ];
    assert_eq!(want.len(), types.len());
    for ((t, v), (wt, text, pg, ansi, my, bound)) in types.iter().zip(want) {
        assert_eq!(*t, wt);
        let col = t.to_lowercase();
        let q = json!({"metrics": ["n"], "filters": [{"field": format!("e.{col}"), "op": "eq", "values": [v]}]});
        for (target, quoted, placeholder, value) in [
            (Target::Postgres, format!("\"e\".\"{col}\""), pg, text),
            // ANSI leaves a bare column as the model writes it, for the engine to fold.
            (Target::Ansi, format!("\"e\".{col}"), ansi, text),
            (Target::Mysql, format!("`e`.`{col}`"), "?", my),
        ] {
            let c = ask(&def, q.clone(), target).unwrap();
            let clause = format!("\nWHERE {quoted} = {placeholder}");
            assert!(
                c.sql.ends_with(&clause),
                "{t} {v} {target:?}: want {clause:?} in\n{}",
                c.sql
            );
            assert_eq!(
                c.parameters,
                vec![Parameter {
                    data_type: bound,
                    value: value.into()
                }],
                "{t} {v} {target:?}"
            );
        }
    }
}
