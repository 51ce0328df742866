"""What the grounding server answers from and what it audits, without ROS: the served
index following real passes on a real SQLite store, the fleet priors it reads, and the
consultation record of each answer."""

from types import SimpleNamespace

import pytest
from helpers import result_event

from robot_memory.consolidation import RulesConfig, consolidation_pass
from robot_memory.consolidation.service import ConsolidationService
from robot_memory.event_kinds import FACT_CONSULTATION, PRIVACY_REJECTION
from robot_memory.grounding.analogies import AnalogySettings
from robot_memory.grounding.audit import AuditWriter, consultation_event, consultation_query
from robot_memory.grounding.limits import MAX_TEXT
from robot_memory.grounding.priors import PriorSettings
from robot_memory.grounding.request import ABSTAIN, OK, GroundingAnswer, GroundingRequest
from robot_memory.grounding.serving import ServedIndex, priors_for_identity
from robot_memory.manifest import load_manifest
from robot_memory.store import MemoryStore

IDENT = "c" * 64
QUESTION = GroundingRequest("manipulation.grasp", "glass_cup", "sim_relaxed")


class Lines(list):
    def log(self, level: str, text: str) -> None:
        self.append((level, text))


@pytest.fixture
def part(db_url):
    store = MemoryStore(db_url, keep_open=True)
    yield store.partition(IDENT)
    store.close()


def results(part, first, n, success=True):
    part.append_many([result_event(first + i, success=success) for i in range(n)])


def delta_of(update, identity_hash=IDENT):
    """A pass's update as the grounding server reads it off facts_delta."""
    return SimpleNamespace(identity_hash=identity_hash, run_event_id=update.run_event_id,
                           previous_run_event_id=update.previous_run_event_id,
                           facts=update.changed)


@pytest.fixture
def passes(part, tmp_path):
    """The consolidator's passes, their updates kept as facts_delta would carry them."""
    updates = []
    service = ConsolidationService(RulesConfig(), archive_dir=tmp_path / "archives",
                                   publish=updates.append, log=lambda level, text: None)
    service.attach(part)
    return service, updates


def test_the_index_follows_each_pass_by_its_delta(part, passes):
    service, updates = passes
    lines = Lines()
    served = ServedIndex(AnalogySettings(), log=lines.log)
    served.attach(part)
    assert served.index.size == 0 and served.run_event_id == 0 and served.reloads == 1
    assert served.index.lookup(QUESTION).status == ABSTAIN
    results(part, 0, 12)
    service.run_pass()
    served.apply_delta(delta_of(updates[-1]))
    assert served.run_event_id == updates[-1].run_event_id and served.reloads == 1
    assert served.index.lookup(QUESTION).status == OK
    assert served.index.size == len(part.facts())
    served.apply_delta(delta_of(updates[-1]))  # already reflected: nothing happens
    results(part, 20, 4, success=False)
    service.run_pass()
    before = served.index
    served.apply_delta(delta_of(updates[-1], identity_hash="d" * 64))  # not ours
    assert served.index is before
    served.apply_delta(delta_of(updates[-1]))
    assert served.index is not before and served.reloads == 1 and lines == []


def test_a_missed_delta_reloads_the_index_from_the_store(part, passes):
    service, updates = passes
    lines = Lines()
    served = ServedIndex(AnalogySettings(), log=lines.log)
    served.attach(part)
    results(part, 0, 12)
    service.run_pass()  # its delta never arrives
    results(part, 20, 3)
    service.run_pass()
    served.apply_delta(delta_of(updates[-1]))
    assert served.reloads == 2 and served.run_event_id == updates[-1].run_event_id
    assert served.index.size == len(part.facts())
    assert lines[0][0] == "warning" and "missed a facts delta" in lines[0][1]


def test_a_pass_whose_delta_never_comes_is_caught_up_at_the_second_look(part):
    lines = Lines()
    served = ServedIndex(AnalogySettings(enabled=True), log=lines.log)
    served.attach(part)
    results(part, 0, 12)
    run = consolidation_pass(part).run_event_id  # outside any node: no delta at all
    served.catch_up()  # possibly in flight: not yet
    assert served.run_event_id == 0 and served.reloads == 1
    served.catch_up()
    assert served.run_event_id == run and served.reloads == 2
    assert served.index.lookup(QUESTION).status == OK
    assert "no facts delta for run" in lines[-1][1]


def test_detached_the_index_is_gone_and_stays_gone(part):
    served = ServedIndex(AnalogySettings())
    served.attach(part)
    assert served.detach() is part
    assert served.index is None and served.partition is None
    served.reload()
    served.catch_up()
    assert served.index is None and served.reloads == 1


def test_a_fact_left_out_is_noticed_once(part):
    served = ServedIndex(AnalogySettings())
    assert served.first_notice("skill_success_rate", "k", "bad value")
    assert not served.first_notice("skill_success_rate", "k", "bad value")
    assert served.first_notice("skill_success_rate", "k", "another reason")


def test_priors_come_only_from_sources_checked_against_the_manifest(manifest_file, tmp_path):
    identity = load_manifest(manifest_file).identity_hash()
    settings = PriorSettings()
    lines = Lines()
    priors, refused = priors_for_identity([], identity, manifest_file, settings, lines.log)
    assert priors.size == 0 and refused == [] and lines == []
    priors, refused = priors_for_identity([str(tmp_path / "no_bundle")], "e" * 64,
                                          manifest_file, settings, lines.log)
    assert priors.size == 0 and len(refused) == 1
    assert "embodiment is unknown" in refused[0] and "no longer hashes" in refused[0]
    lines.clear()
    priors, refused = priors_for_identity([str(tmp_path / "no_bundle")], identity,
                                          manifest_file, settings, lines.log)
    assert priors.size == 0 and len(refused) == 1 and "no_bundle" in refused[0]
    assert [level for level, _ in lines] == ["info", "error"]


def request(**fields):
    """GroundingQuery's request fields, as the service gets them."""
    given = {"skill_id": "manipulation.grasp", "target_class": "glass_cup",
             "environment": "sim_relaxed", "zone": "", "fact_kinds": ["skill_success_rate"],
             "min_confidence": 0.0, "max_results": 0, "allow_analogies": False,
             "target_properties": [], "max_analogies": 0, "allow_priors": False,
             "requester": "planner", "intent_id": "pick-1"}
    given.update(fields)
    return SimpleNamespace(**given)


def test_the_consultation_record_keeps_the_question_and_what_was_served():
    answer = GroundingAnswer(ABSTAIN, "no_fact", "nothing known")
    event = consultation_event(request(), answer, "id-1", 42)
    assert event.kind == FACT_CONSULTATION and event.stamp_ns == 42
    assert event.payload == {
        "consultation_id": "id-1", "requester": "planner", "intent_id": "pick-1",
        "status": ABSTAIN, "reason_code": "no_fact", "facts": [],
        "query": {"skill_id": "manipulation.grasp", "target_class": "glass_cup",
                  "environment": "sim_relaxed", "fact_kinds": ["skill_success_rate"]}}


def test_analogy_and_priors_fields_appear_only_when_allowed():
    kv = SimpleNamespace
    asked = request(allow_analogies=True, max_analogies=3, allow_priors=True,
                    target_properties=[kv(key="mass_kg", value=0.3),
                                       kv(key="width_m", value=float("nan"))])
    assert consultation_query(asked) == {
        "skill_id": "manipulation.grasp", "target_class": "glass_cup",
        "environment": "sim_relaxed", "fact_kinds": ["skill_success_rate"],
        "allow_analogies": True, "max_analogies": 3,
        "target_properties": [["mass_kg", 0.3], ["width_m", "nan"]], "allow_priors": True}


def test_a_request_refused_unread_is_kept_clipped():
    too_long = "x" * (MAX_TEXT + 1)
    asked = request(requester=too_long, target_class=too_long, allow_analogies=True,
                    target_properties=[SimpleNamespace(key="mass_kg", value=1.0)])
    event = consultation_event(asked, GroundingAnswer(3, "invalid_request", "too long"),
                               "id-2", 7, refused_unread=True)
    clipped = f"({MAX_TEXT + 1} characters, over the limit)"
    assert event.payload["requester"] == clipped and event.payload["intent_id"] == "pick-1"
    query = event.payload["query"]
    assert query["target_class"] == clipped and query["skill_id"] == "manipulation.grasp"
    assert query["fact_kinds"] == [] and query["target_properties"] == []


def test_the_record_reaches_the_log_through_the_audit_writer_screened(part):
    writer = AuditWriter(part, flush_period_s=60.0)
    answer = GroundingAnswer(ABSTAIN, "no_fact", "nothing known")
    writer.submit(consultation_event(request(), answer, "id-1", 1))
    writer.submit(consultation_event(request(requester="bob.jones@example.com"), answer,
                                     "id-2", 2))
    writer.close()
    events = list(part.events([FACT_CONSULTATION, PRIVACY_REJECTION]))
    assert [e.kind for e in events] == [FACT_CONSULTATION, FACT_CONSULTATION,
                                        PRIVACY_REJECTION]
    assert events[0].payload["requester"] == "planner"
    assert events[1].payload["requester"] == "[refused: privacy_email]"
