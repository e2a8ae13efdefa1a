"""What the server keeps of Slurm for the job routes (infosvc/web/slurmjobs.py): the config and
account policy, Slurm's own settings, the jobs it submitted (who, as which account, when), the
submit slots and bulk turn, the jobs of unanswered submissions being withdrawn, and the threads
Slurm's commands run in."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Final, Mapping

from infosvc.config import LrmsConfig, owner_map
from infosvc.lrms import slurm_jobs
from infosvc.lrms.slurm_commands import SlurmUnavailable
from infosvc.lrms.slurm_settings import SlurmSettings
from infosvc.lrms.slurm_jobs import Submitted
from infosvc.store import Store, StoreError
from infosvc_agents.accounts import AccountPolicy

__all__ = ["BULK_JOBS", "SLURM_THREADS", "SUBMIT_SLOTS", "SlurmSide"]

log = logging.getLogger("infosvc.web.slurmjobs")

#: sbatch processes one server runs at once.
SUBMIT_SLOTS: Final = 4
#: Jobs whose submitter the server remembers (a dict entry each): far more than Slurm keeps at once.
MAX_KNOWN: Final = 200_000
#: Slurm's submit time of a job this service submitted is within this of the service's clock then
#: (the two clocks' skew and sbatch's time): a job of the same id submitted later is another's
SAME_SUBMISSION_SECONDS: Final = 300.0
#: How long after Slurm answers again the job of an unanswered submission is still looked for
WITHDRAW_SECONDS: Final = 180.0
#: Withdrawals under way at most (each a squeue every interval while Slurm does not answer), and
#: the one thread they run in
MAX_WITHDRAWING: Final = 16
WITHDRAW_THREAD: Final = ThreadPoolExecutor(max_workers=1, thread_name_prefix="infosvc-slurm-withdraw")
#: A group of more jobs than this is a bulk submission (one sbatch each): one at a time
BULK_JOBS: Final = 8
#: Slurm's commands run in threads of their own: a slow controller (each command up to
#: `timeout_seconds`) kept the loop's default pool, which reads documents and the store, busy
SLURM_THREADS: Final = ThreadPoolExecutor(max_workers=4, thread_name_prefix="infosvc-slurm")

@dataclass
class SlurmSide:
    """What the server keeps of Slurm: the config, who submits as which account, the jobs it
    submitted since it started (owner and token, for the token rules), and the submit slots."""

    config: LrmsConfig
    policy: AccountPolicy
    #: job id -> who submitted it, the account it was submitted as (None: the server's own), when,
    #: and its mark (the job's comment)
    known: dict[str, tuple[Submitted, str | None, float, str | None]] = field(default_factory=dict)
    #: Slurm's own settings the routes heed (its daemons' accounts, PrivateData), read once
    settings: SlurmSettings | None = None
    slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(SUBMIT_SLOTS))
    #: the jobs of unanswered submissions being withdrawn in the background, and their markers
    withdrawing: dict[asyncio.Task[None], str] = field(default_factory=dict)
    #: groups of more than BULK_JOBS jobs go in one at a time, so that they never hold every slot
    bulk: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(1))
    #: where the withdrawals under way are kept, so that a restart goes on with them (None: nowhere)
    store: Store | None = None

    def remember(self, job_id: str, submitted: Submitted, account: str | None, at: float,
                 marker: str | None = None) -> None:
        """Who submitted `job_id`, as `account` at `at`, the oldest forgotten past MAX_KNOWN (its
        owner's token keeps its rights where the job runs as the owner's own account: `_own_account`)."""
        self.known[job_id] = (submitted, account, at, marker)
        if len(self.known) > MAX_KNOWN:
            del self.known[next(iter(self.known))]

    @contextlib.asynccontextmanager
    async def slot(self, jobs: int) -> AsyncIterator[None]:
        """A submission's turn: one of SUBMIT_SLOTS, and for a group of more than BULK_JOBS jobs
        (an sbatch each) the one bulk turn first: four groups of 1,000 jobs held every slot for a
        minute, and a one-job submission of another token waited as long."""
        async with self.bulk if jobs > BULK_JOBS else contextlib.nullcontext(), self.slots:
            yield

    def withdraw_later(self, marker: str, user: str) -> bool:
        """Withdraw the job of `marker`, should Slurm have it or take it late, in the background:
        tried each `interval_seconds` while Slurm does not answer, and for WITHDRAW_SECONDS after
        its first answer (a request slurmctld queued may still become a job), in a thread of its
        own (the routes' Slurm threads stay theirs). False, and a warning naming it, past
        MAX_WITHDRAWING under way: each is a squeue every interval while Slurm is down."""
        if len(self.withdrawing) >= MAX_WITHDRAWING:
            log.warning("the job of an unanswered sbatch (%s, as %s) is not withdrawn: %d withdrawals are under "
                        "way; cancel it should it appear (squeue --format=%%k)", marker, user, len(self.withdrawing))
            return False
        self._start_withdrawal(marker, user, keep=True)
        return True

    async def keep_in(self, store: Store) -> None:
        """At the server's start: the withdrawals under way are kept in `store` from now on, and
        those a stop (or a crash) left there go on."""
        self.store = store
        self.resume(await asyncio.to_thread(store.withdrawals))

    def resume(self, kept: list[tuple[str, str, float]]) -> None:
        """At the server's start: the withdrawals a stop (or a crash) left, from the store, go on."""
        for marker, user, _ in kept[:MAX_WITHDRAWING]:
            log.warning("withdrawing, should Slurm have it, the job of an sbatch left unanswered before the "
                        "restart (its comment %s, as %s)", marker, user)
            self._start_withdrawal(marker, user, keep=False)
        for marker, user, _ in kept[MAX_WITHDRAWING:]:
            log.warning("the job of an unanswered sbatch (%s, as %s) is not withdrawn: more are kept than are "
                        "withdrawn at once; cancel it should it appear (squeue --format=%%k)", marker, user)

    def _start_withdrawal(self, marker: str, user: str, *, keep: bool) -> None:
        task = asyncio.get_running_loop().create_task(self._withdraw(marker, user, keep))
        self.withdrawing[task] = marker
        task.add_done_callback(lambda done: self.withdrawing.pop(done, None))

    def stop(self) -> None:
        """At the server's stop: the withdrawals under way end, each named in the log (the job of
        an unanswered sbatch may be in Slurm: its comment is the marker)."""
        for task, marker in list(self.withdrawing.items()):
            task.cancel()
            log.warning("stopping with the job of an unanswered sbatch not yet withdrawn (its comment %s): %s",
                        marker, "the next start goes on" if self.store is not None else "cancel it should Slurm have it")

    async def _withdraw(self, marker: str, user: str, keep: bool) -> None:
        if keep and self.store is not None:
            try:
                await self.store.keep_withdrawal(marker, user, time.time())
            except StoreError as exc:  # withdrawn all the same, while this server runs
                log.warning("the withdrawal of %s is not kept for a restart: %s", marker, exc)
        answered: float | None = None
        told: set[str] = set()
        while answered is None or time.monotonic() - answered < WITHDRAW_SECONDS:
            try:
                found = await asyncio.get_running_loop().run_in_executor(
                    WITHDRAW_THREAD, functools.partial(slurm_jobs.withdraw, self.config, marker, user))
            except SlurmUnavailable:
                found = None
            if found is not None:
                answered = answered or time.monotonic()
                for job_id, state in found.items():
                    if job_id in told:
                        continue
                    told.add(job_id)
                    log.warning("Slurm took job %s (%s) after its sbatch went unanswered; it was withdrawn (%s)",
                                job_id, marker, state)
            await asyncio.sleep(max(1.0, self.config.interval_seconds))
        if self.store is not None:
            try:
                await self.store.drop_withdrawal(marker)
            except StoreError as exc:
                log.warning("the withdrawal of %s, done, stays kept: %s", marker, exc)

    def submitted_of(self, record: Mapping[str, Any]) -> Submitted | None:
        """Who submitted the job of Slurm's `record`, where this service did: its id alone is not
        enough, as Slurm gives an id again (a controller started without its state, MaxJobId
        passed), and another user's job of that id had the first submitter's rights and owner. It
        is the job submitted while Slurm says the same account and the submission's mark (its
        comment); where the record has no comment, a submit time near the submission's (a requeue
        moves Slurm's submit time, never the comment)."""
        job_id = record.get("job_id")
        # one sbatch a job, never an array: a task or component is no submission of the service's,
        # whatever its array's or het job's number (Slurm gives numbers again) and its comment
        found = self.known.get(str(job_id)) if slurm_jobs.plain_id(job_id) else None
        if found is None:
            return None
        submitted, account, at, marker = found
        if account is not None and record.get("user_name") not in (None, account):
            return None
        comment = record.get("comment")
        if marker is not None and comment is not None:
            return submitted if comment == marker else None
        when = record.get("submit_time")
        if isinstance(when, (int, float)) and not isinstance(when, bool) and abs(when - at) > SAME_SUBMISSION_SECONDS:
            return None
        return submitted

    @classmethod
    def of(cls, config: LrmsConfig) -> SlurmSide:
        """At the server's start: the account policy of `config` (its run_as_map read: a ConfigError
        where it cannot be, as load_config says first), and a warning where the policy names other
        accounts but the server, not root, can submit only as itself."""
        mapping = owner_map(config)
        if config.slurm and (config.run_as or config.run_as_owner or config.run_as_map) and os.geteuid() != 0:
            log.warning("[lrms] run_as, run_as_owner and run_as_map need a server running as root: this one runs "
                        "as uid %d, not root, so every job is submitted to Slurm as that user, whoever owns it",
                        os.geteuid())
        return cls(config, AccountPolicy(config.run_as or None, config.run_as_owner, mapping, config.min_uid,
                                         config.max_uid))
