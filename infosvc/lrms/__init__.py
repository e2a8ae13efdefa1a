"""The site's batch system when it is not the service's own queue: a Slurm cluster read through
its commands (slurm_commands), parsed into a model of its nodes, partitions and jobs that knows no
HTTP, and published as the site's hosts and computing elements."""
