"""The `tfaccel` command line: click commands (`main`) and the multi-worker launcher."""
