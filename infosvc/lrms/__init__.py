"""The batch systems the service hands its jobs to and reads (docs/slurm.md)."""
