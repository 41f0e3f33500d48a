"""Times MetricFlow compiling metric queries to SQL, in process, for benches/compile.rs.

Run with the Python of `hack/ossie-consumers`'s venv, in a dbt project parsed by `dbt parse`:

    python hack/bench-metricflow.py PROJECT QUERIES.json ITERATIONS

QUERIES.json is a list of {"name", "metrics", "group_by", "where", "order", "limit"}. The engine
is built once, as `mf` builds it; each query's first compile is timed alone (MetricFlow caches
plan pieces), then ITERATIONS more. Prints one JSON object per query: first, p50 and p99 in
microseconds, and the length of the SQL (to show something was compiled).
"""

import json
import pathlib
import sys
import time

from dbt_metricflow.cli.cli_configuration import CLIConfiguration
from metricflow.engine.metricflow_engine import MetricFlowQueryRequest


def request(query):
    return MetricFlowQueryRequest.create(
        metric_names=query["metrics"],
        group_by_names=query.get("group_by") or None,
        where_constraints=[query["where"]] if query.get("where") else None,
        order_by_names=query.get("order") or None,
        limit=query.get("limit"),
    )


def percentile(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))]


def main():
    project = pathlib.Path(sys.argv[1])
    queries = json.loads(pathlib.Path(sys.argv[2]).read_text())
    iterations = int(sys.argv[3])
    config = CLIConfiguration()
    config.setup(dbt_profiles_path=project, dbt_project_path=project, configure_file_logging=False)
    engine = config.mf
    for query in queries:
        start = time.perf_counter_ns()
        sql = engine.explain(request(query)).sql_statement.sql
        first = (time.perf_counter_ns() - start) / 1000
        times = []
        for _ in range(iterations):
            start = time.perf_counter_ns()
            engine.explain(request(query)).sql_statement.sql
            times.append((time.perf_counter_ns() - start) / 1000)
        times.sort()
        print(json.dumps({
            "name": query["name"],
            "first_us": first,
            "p50_us": percentile(times, 0.50),
            "p99_us": percentile(times, 0.99),
            "sql_chars": len(sql),
        }), flush=True)


if __name__ == "__main__":
    main()
