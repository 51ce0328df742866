"""bench.ingest_cost takes results through the logger's intake and writer, then replays
the rows they wrote, rollups included (it checks the row counts match itself)."""

from bench import ingest_cost


def test_replay_rewrites_what_the_writer_wrote_across_a_rollup_block():
    cost = ingest_cost.measure(4200)  # past the first rollup block (4096 results)
    assert cost["results"] == 4200 and cost["batch"] == ingest_cost.BATCH
    assert all(cost[part] > 0 for part in ("intake_us_per_result", "writer_us_per_result",
                                           "store_rows_only_us_per_result"))


def test_the_budget_adds_the_live_dds_threads_to_the_parts():
    from bench.ingest import cpu_budget
    live = {"rate_per_s": 1000, "logger_cores": 0.2, "logger_cores_dds_threads": 0.03}
    parts = {"intake_us_per_result": 30.0, "writer_us_per_result": 50.0,
             "store_rows_only_us_per_result": 35.0}
    budget = cpu_budget({"four_process": {"rates": [live]}}, parts)
    assert budget["standalone_and_dds_cores"] == 0.11
    assert budget["store_rows_only_and_dds_cores"] == 0.065
    assert budget["live_cores"] == 0.2 and budget["goal_cores"] == 0.1
