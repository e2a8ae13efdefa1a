"""What the server remembers of the jobs it submitted to Slurm, and when a job of Slurm is one of
them: Slurm gives an id again (a controller started without its saved state, MaxJobId passed), and
a review had another user's job of a remembered id listed as the first submitter's and cancelled
and released by that submitter's token."""

from __future__ import annotations

from pathlib import Path

import pytest

from infosvc.config import LrmsConfig
from infosvc.lrms.slurm_jobs import Submitted
from infosvc.web.slurmside import SAME_SUBMISSION_SECONDS, SlurmSide

AT = 1_795_762_960.0


def side() -> SlurmSide:
    found = SlurmSide.of(LrmsConfig(type="slurm"))
    found.remember("2", Submitted("alice", "token-a"), "nobody", AT)
    found.remember("3", Submitted("carol", "token-c"), None, AT)
    return found


def test_a_job_is_the_one_submitted_when_its_account_and_time_are() -> None:
    known = side()
    assert known.submitted_of({"job_id": 2, "user_name": "nobody", "submit_time": int(AT) + 1}) == \
        Submitted("alice", "token-a")
    assert known.submitted_of({"job_id": "2"}) == Submitted("alice", "token-a")  # what a record does not say


def test_a_job_of_a_remembered_id_by_another_account_or_later_is_not() -> None:
    known = side()
    assert known.submitted_of({"job_id": 2, "user_name": "rvw-bob", "submit_time": int(AT)}) is None
    later = int(AT + SAME_SUBMISSION_SECONDS) + 1
    assert known.submitted_of({"job_id": 2, "user_name": "nobody", "submit_time": later}) is None
    # submitted as the server's own account (not root): the time alone tells
    assert known.submitted_of({"job_id": 3, "user_name": "anyone", "submit_time": int(AT)}) == \
        Submitted("carol", "token-c")
    assert known.submitted_of({"job_id": 3, "user_name": "anyone", "submit_time": later}) is None
    assert known.submitted_of({"job_id": 4, "user_name": "nobody", "submit_time": int(AT)}) is None


def test_a_bulk_group_waits_for_the_bulk_turn_and_leaves_the_slots_to_the_rest() -> None:
    import asyncio

    from infosvc.web.slurmside import BULK_JOBS, SUBMIT_SLOTS

    async def run() -> list[str]:
        known = SlurmSide.of(LrmsConfig(type="slurm"))
        order: list[str] = []
        release = asyncio.Event()

        async def submission(name: str, jobs: int) -> None:
            async with known.slot(jobs):
                order.append(name)
                await release.wait()

        bulk = [asyncio.create_task(submission(f"bulk{n}", BULK_JOBS + 1)) for n in range(SUBMIT_SLOTS)]
        await asyncio.sleep(0.05)
        small = asyncio.create_task(submission("one", 1))
        await asyncio.sleep(0.05)
        taken = list(order)  # while the first bulk group is under way
        release.set()
        await asyncio.gather(*bulk, small)
        return taken

    taken = asyncio.run(run())
    assert taken == ["bulk0", "one"], taken  # one bulk group at a time; the one-job submission not kept out


def test_a_portal_s_token_asks_slurm_only_of_the_jobs_it_submitted() -> None:
    import pytest

    from infosvc.errors import Forbidden
    from infosvc.web.slurmjobs import _may_ask, _Who

    known = side()
    _may_ask(known, "2", _Who(False, "token-a", None), "cancel")  # its own: Slurm is asked
    _may_ask(known, "9", _Who(True, "token-x", None), "cancel")  # an admin's: any job
    _may_ask(known, "9", _Who(False, "token-x", "bob"), "cancel")  # bound to a user: Slurm says whose
    for job_id in ("2", "9"):
        with pytest.raises(Forbidden):
            _may_ask(known, job_id, _Who(False, "token-x", None), "cancel")


def test_under_private_jobs_a_reader_is_shown_only_the_jobs_it_may_change() -> None:
    # a review: with PrivateData=jobs a user's own squeue showed nothing of another's job, while
    # anonymous GET /v1/jobs showed its name, owner and state: the server reads Slurm as root
    from infosvc.lrms.slurm_settings import SlurmSettings
    from infosvc.web.slurmjobs import _shown, _Who

    known = side()
    alices = {"job_id": 2, "user_name": "nobody", "submit_time": int(AT)}
    direct = {"job_id": 7, "user_name": "rvw-bob", "submit_time": int(AT)}
    private, open_ = SlurmSettings(private=frozenset({"jobs"})), SlurmSettings()
    assert _shown(known, open_, None)(direct) and _shown(known, open_, None)(alices)
    assert not _shown(known, private, None)(alices) and not _shown(known, private, None)(direct)
    portal = _Who(False, "token-a", None)
    assert _shown(known, private, portal)(alices) and not _shown(known, private, portal)(direct)
    bound = _Who(False, "token-z", "alice")  # bound to alice: her jobs whatever token filed them
    assert _shown(known, private, bound)(alices) and not _shown(known, private, bound)(direct)
    admin = _Who(True, "token-admin", None)
    assert _shown(known, private, admin)(direct)


def test_an_unanswered_submission_is_said_to_be_maybe_in_slurm_and_withdrawn_once_slurm_answers(
        monkeypatch: "pytest.MonkeyPatch", caplog: "pytest.LogCaptureFixture") -> None:
    import asyncio
    import logging

    import pytest

    from infosvc.errors import Unavailable
    from infosvc.lrms import slurm_jobs
    from infosvc.lrms.slurm_commands import SlurmUnavailable
    from infosvc.lrms.slurm_jobs import SubmissionUnknown
    from infosvc.web import slurmside
    from infosvc.web.slurmjobs import _submitted

    asked: list[tuple[str, str]] = []

    def submit(config: object, batch: object, account: object, marker: str) -> str:
        raise SubmissionUnknown("sbatch did not finish within 2 s, and Slurm cannot be asked", "infosvc:ab", "nobody")

    def withdraw(config: object, marker: str, user: str) -> dict[str, str]:
        asked.append((marker, user))
        if len(asked) == 1:
            raise SlurmUnavailable("still not answering")
        return {"7": "PENDING"} if len(asked) == 2 else {"7": "CANCELLED"}

    monkeypatch.setattr(slurm_jobs, "submit", submit)
    monkeypatch.setattr(slurm_jobs, "withdraw", withdraw)
    monkeypatch.setattr(slurmside, "WITHDRAW_SECONDS", 0.5)

    async def run() -> Unavailable:
        known = SlurmSide.of(LrmsConfig(type="slurm", interval_seconds=1.0))
        with pytest.raises(Unavailable) as caught:
            await _submitted(known, object(), None, "infosvc:ab")
        assert known.withdrawing
        await asyncio.wait_for(asyncio.gather(*known.withdrawing), 20)
        return caught.value

    with caplog.at_level(logging.WARNING, logger="infosvc.web.slurmjobs"):
        refused = asyncio.run(run())
    assert "may have been submitted" in (refused.detail or ""), refused.detail
    assert asked[:2] == [("infosvc:ab", "nobody")] * 2 and len(asked) >= 2  # again until Slurm answered, and after
    assert any("Slurm took job 7" in r.getMessage() for r in caplog.records)


def test_withdrawals_are_bounded_and_named_at_the_stop(monkeypatch: "pytest.MonkeyPatch",
                                                      caplog: "pytest.LogCaptureFixture") -> None:
    # a review: one task per unanswered POST, for as long as Slurm stays down, in the routes' own
    # Slurm threads; and at the server's stop they ended without a word
    import asyncio
    import logging

    from infosvc.lrms import slurm_jobs
    from infosvc.lrms.slurm_commands import SlurmUnavailable
    from infosvc.web import slurmside

    def withdraw(config: object, marker: str, user: str) -> dict[str, str]:
        raise SlurmUnavailable("still not answering")

    monkeypatch.setattr(slurm_jobs, "withdraw", withdraw)
    monkeypatch.setattr(slurmside, "MAX_WITHDRAWING", 2)

    async def run() -> list[bool]:
        known = SlurmSide.of(LrmsConfig(type="slurm", interval_seconds=1.0))
        taken = [known.withdraw_later(f"infosvc:{n}", "nobody") for n in range(3)]
        await asyncio.sleep(0.1)
        tasks = list(known.withdrawing)
        known.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert all(task.cancelled() for task in tasks) and not known.withdrawing
        return taken

    with caplog.at_level(logging.WARNING, logger="infosvc.web.slurmjobs"):
        assert asyncio.run(run()) == [True, True, False]
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "infosvc:2" in said and "not withdrawn" in said  # past the bound
    assert "infosvc:0" in said and "infosvc:1" in said and "stopping" in said  # named at the stop


def test_a_requeued_job_is_still_the_one_submitted_by_its_mark() -> None:
    # a review: Slurm moves a job's submit time when it requeues it (a node failed, preemption):
    # past five minutes, the service's own job lost its owner and its submitter's rights
    known = SlurmSide.of(LrmsConfig(type="slurm"))
    known.remember("5", Submitted("alice", "token-a"), "nobody", AT, "infosvc:5a")
    requeued = {"job_id": 5, "user_name": "nobody", "submit_time": int(AT) + 3600, "comment": "infosvc:5a"}
    assert known.submitted_of(requeued) == Submitted("alice", "token-a")
    other = {"job_id": 5, "user_name": "nobody", "submit_time": int(AT), "comment": "infosvc:other"}
    assert known.submitted_of(other) is None  # a job of that id made again, with another mark
    assert known.submitted_of({**requeued, "comment": ""}) is None


def test_a_withdrawal_a_stop_left_goes_on_at_the_next_start(tmp_path: "Path", monkeypatch: "pytest.MonkeyPatch") -> None:
    # the job of an unanswered sbatch may come to be in Slurm while the server is down: the
    # withdrawal is kept in the store, and the next start goes on with it until Slurm answers
    import asyncio

    from infosvc.lrms import slurm_jobs
    from infosvc.lrms.slurm_commands import SlurmUnavailable
    from infosvc.store import Store
    from infosvc.web import slurmside

    answering = [False]
    asked: list[str] = []

    def withdraw(config: object, marker: str, user: str) -> dict[str, str]:
        asked.append(marker)
        if not answering[0]:
            raise SlurmUnavailable("still not answering")
        return {"8": "PENDING"}

    monkeypatch.setattr(slurm_jobs, "withdraw", withdraw)
    monkeypatch.setattr(slurmside, "WITHDRAW_SECONDS", 0.5)
    store = Store(tmp_path / "infosvc.sqlite")
    try:
        async def before_the_stop() -> list[tuple[str, str, float]]:
            known = SlurmSide.of(LrmsConfig(type="slurm", interval_seconds=1.0))
            known.store = store
            assert known.withdraw_later("infosvc:kept", "nobody")
            for _ in range(100):
                if store.withdrawals():
                    break
                await asyncio.sleep(0.02)
            tasks = list(known.withdrawing)
            known.stop()
            await asyncio.gather(*tasks, return_exceptions=True)
            return store.withdrawals()

        kept = asyncio.run(before_the_stop())
        assert [(marker, user) for marker, user, _ in kept] == [("infosvc:kept", "nobody")]
        answering[0] = True
        asked.clear()

        async def after_the_start() -> list[tuple[str, str, float]]:
            known = SlurmSide.of(LrmsConfig(type="slurm", interval_seconds=1.0))
            known.store = store
            known.resume(store.withdrawals())
            await asyncio.wait_for(asyncio.gather(*known.withdrawing), 20)
            return store.withdrawals()

        assert asyncio.run(after_the_start()) == []  # withdrawn, and no longer kept
        assert asked and set(asked) == {"infosvc:kept"}
    finally:
        store.close()
