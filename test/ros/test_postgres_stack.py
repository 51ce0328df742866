"""The whole stack on a real PostgreSQL server instead of a SQLite file: the same
end-to-end tests, collected again here with `db_url` pointing at a fresh database on
the test session's server (see test/postgres_server.py)."""

import pytest
from ros import test_crashes, test_governance, test_pipeline, test_record_event_retry


@pytest.fixture
def db_url(pg_url):
    return pg_url


test_results_become_facts_on_postgresql = \
    test_pipeline.test_results_become_facts_the_planner_can_ground_on
test_record_event_on_postgresql = \
    test_governance.test_record_event_is_acknowledged_only_when_durable
test_a_retried_record_event_is_stored_once_on_postgresql = \
    test_record_event_retry.test_a_retried_record_event_is_stored_once_also_across_a_logger_restart
test_overrides_on_postgresql = \
    test_governance.test_override_service_and_cli_take_effect_on_the_running_stack
test_another_identity_is_invisible_on_postgresql = \
    test_governance.test_another_identity_is_invisible_through_the_nodes
test_kill_9_logger_on_postgresql_loses_no_acknowledged_event = \
    test_crashes.test_kill_9_logger_during_ingest_loses_no_acknowledged_event
