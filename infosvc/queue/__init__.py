"""The job queue aggregate: submissions read and filed, the scheduling passes against the live
hosts, executors' reports, and the CEs' figures it publishes. No HTTP.
This is the package's face: other packages import from here, not from its modules."""

from infosvc.queue import jobcontrols  # a job's controls, decided apart from the queue that stores them
from infosvc.queue.accounting import Cursor, Listing, Page, listing_page
from infosvc.queue.dryrun import MAX_MATCH_JOBS, PreparedMatch, Scheduled, dry_run, prepare_match
from infosvc.queue.jobqueue import JobQueue
from infosvc.queue.processors import scheduler_view, totals
from infosvc.queue.submissions import (
    MAX_GROUP_JOBS, TRUSTED, Filer, Prepared, check_group, owner_of, prepare, read_document,
)

__all__ = ["MAX_GROUP_JOBS", "MAX_MATCH_JOBS", "TRUSTED", "Cursor", "Filer", "JobQueue", "Listing", "Page", "Prepared",
           "PreparedMatch", "Scheduled", "check_group", "dry_run", "jobcontrols", "listing_page", "owner_of", "prepare",
           "prepare_match", "read_document", "scheduler_view", "totals"]
