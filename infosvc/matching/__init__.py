"""Requirement evaluation: does an SSS Job (or task group) fit a host, and if not, why not.

Pure functions over the model, no HTTP. `compile_requirements(job)` turns the job's Requested
expressions (the job's, its task groups', their tasks') into `Requirements`; `evaluate`
gives a `Verdict(ok, reasons, score)` for one host from its SSS Node and its GLUE Host; `match`
runs a job over a whole site and orders the hosts that fit; given the site's columns
(infosvc.matching.hostcolumns), it decides a job whose per-host part is free-CPU / RAM thresholds and
GPU amounts with array operations instead of a loop over the hosts (`columns.match_columns`), and any other job host
by host (`engine.match_hosts`): one engine, two ways, the same answer. What it reads of a site is a
`SiteView`: infosvc.hosts.rollup.Rollup is one, and so is a simulator's site.

Static and dynamic parts. Each leaf of the expression is *static* when its outcome depends only on
what every host of a subcluster shares (rollup.subcluster_key: cluster, processor model and clock,
CPU count, OS name and release, architecture and ISA) or *dynamic* otherwise (free processors and
memory, configured RAM — the key rounds it to the GiB —, node names, features, disks, other
Resources). The top-level conjuncts that are wholly static are evaluated once per subcluster (and
the node's Opsys, which the key does not hold: the cache key is (subcluster, opsys)); the rest per
host. `Requirements.evaluations` counts both.

Semantics (docs/matching.md has the whole list):
- Consumables: Processors and Memory read the GLUE Host (free and total CPUs, free and total RAM
  in MB); Disk, Swap, Network and Resource (licenses, NetworkAdapter, ...) read the node's
  Available (context Available, Dedicated) or Configured category. Units are converted to the
  job's (default MB for Memory, Swap, Disk). In context Available or Dedicated an amount is what
  the job takes: EQ (the default) and GE ask the host for at least that much ("4 processors" fit a
  host with 8 free), GT for more; LE, LT and NE bound the job (Processors GE 8 with LE 16) and
  ask nothing of the host. In context Configured, which describes the host, every op is literal.
  Context Used is no requirement.
- A request is per host: Processors GE 8 asks for a host with 8 free processors.
- Feature: every feature of a List must be present (NE: none of them); a Pattern, or op Match,
  must match one of the host's features.
- Node: the host's Id (never the Name its agent chose) must be among the names (List, Range;
  compared as DNS names: without regard to case, one final dot ignored) or match the Pattern.
- Architecture: the node's arch or the processor's ISA. OperatingSystem: the OS name, "name
  release", or the node's Opsys, case-insensitive. Partition and Machine: the host's cluster.
- ResourceManagerType (the LRMS type, without regard to case), Queue (exactly) and Duration (the
  wall-clock time asked, against MaxWallClockTime in minutes; 0 is no limit) ask something of a CE
  serving the host's cluster; the CE terms of one conjunction must all be met by one CE
  (`ce.ce_together`).
- Other simple properties (User, Account, NodeCount, ...) are no property of a host: they hold,
  and compile_requirements says so in its notes.
- op Match: a regular expression, fully matched, guarded (see `guarded_regex`).
- Preferences: a Preferred set holds when one alternative holds and adds the weight of the best
  one that holds to the score; a soft (negative preference) term never fails a host and adds its
  share when it holds.
- A host that is not Ready never matches ("host is Paused").

The modules, by concern: `errors` (MatchError), `patterns` (the RE2 guard), `ranges` (Range
bounds), `view` (SiteView, Site, SiteSnapshot), `checks` (one term of a host), `ce` (terms on a
computing element), `expression` (the compiled expression), `requirements` (compiling a job, its
budget, one host's Verdict; at most MAX_TERMS terms a job), `work` (the work budget of one request,
charged per host, and per Feature pattern on hosts of many features), `engine` (`match` over a site, and its per-host way), and the seams
it is cut along: `hostquestion` (what each host is asked), `subclusters` (the static part once per
subcluster), `ranking` (the order of the hosts that fit); `columns` (the fast way, over
`hostcolumns`), `result` (what a match found, and its bounded answer).
"""

from __future__ import annotations

from infosvc.matching.engine import match
from infosvc.matching.errors import MatchError
from infosvc.matching.hostquestion import HostQuestion
from infosvc.matching.patterns import MAX_PATTERN, MAX_SUBJECT, Regex, guarded_regex
from infosvc.matching.ranges import MAX_RANGE, check_range_budget
from infosvc.matching.requirements import MAX_TERMS, MatchTooCostly, Requirements, Verdict, compile_requirements, evaluate
from infosvc.matching.result import MAX_REASONS, AnswerLimits, Candidate, MatchResult
from infosvc.matching.view import CE, Site, SiteSnapshot, SiteView, SubclusterView, SyncedColumns

__all__ = [
    "MatchError", "Requirements", "Verdict", "Site", "Candidate", "MatchResult", "compile_requirements",
    "evaluate", "match", "AnswerLimits", "SiteSnapshot", "SyncedColumns", "MatchTooCostly", "MAX_REASONS",
    "guarded_regex", "check_range_budget", "MAX_PATTERN", "MAX_SUBJECT", "MAX_RANGE",
    "SiteView", "SubclusterView", "CE", "Regex", "HostQuestion", "MAX_TERMS",
]
