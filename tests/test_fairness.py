"""One session's share of the server under load: a bystander's slider changes while other
sessions train at the heaviest setting and loop PULL-DOC-REQ. The test asserts what the load
must not take away (every change answered, the runs going on meanwhile); how long the answers
take, against the same bystander's quiet answers, is a figure of `make bench` (section
*fairness*, testkit.fairness.bystander_under_load with ``quiet``), not a pass or fail here."""

from __future__ import annotations

from conftest import Server
from testkit.fairness import CHECKED, bystander_under_load


def test_a_bystander_is_answered_while_others_train_and_pull(tmp_path):
    """6 sessions train at the heaviest setting the controls allow and 3 loop PULL-DOC-REQ:
    each of a bystander's slider changes is answered, and the trainers' curves grow while it
    is (the runs take turns on one training thread, a slice at a time). Over 20 s: ten
    sessions at the heaviest setting opened and trained. The answers' times against the
    bystander's quiet ones: `make bench`, section fairness."""
    srv = Server(log=tmp_path / "server.log")
    try:
        result = bystander_under_load(srv.url, trainers=6, pullers=3, quiet=False)
    finally:
        srv.stop()
    before, after = result["training_patches"]
    summary = (f"{len(result['loaded'])} answers, training patches {result['training_patches']}, "
               f"pulls {result['pulls']}")
    assert result["answered"] == CHECKED, summary
    assert len(after) == 6 and sum(after.values()) > sum(before.values()), summary
