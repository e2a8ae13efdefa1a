"""Programs vendored from other projects, run by the tests as outside programs (each directory's
README.md says what and from where): their Python is theirs, never collected as tests here."""

collect_ignore_glob = ["*"]
