"""The job queue aggregate: submissions read and filed, the scheduling passes against the live
hosts, executors' reports, and the CEs' figures it publishes. No HTTP.
This is the package's face: other packages import from here, not from its modules."""

from infosvc.queue import jobcontrols  # a job's controls, decided apart from the queue that stores them
from infosvc.queue.accounting import Cursor, Listing, Page, listing_page
from infosvc.queue.dryrun import MAX_MATCH_JOBS, PreparedMatch, dry_run, prepare_match
from infosvc.queue.jobqueue import JobQueue
from infosvc.queue.submissions import TRUSTED, prepare

__all__ = ["MAX_MATCH_JOBS", "TRUSTED", "Cursor", "JobQueue", "Listing", "Page", "PreparedMatch", "dry_run",
           "jobcontrols", "listing_page", "prepare", "prepare_match"]
