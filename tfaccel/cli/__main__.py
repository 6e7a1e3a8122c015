"""`python -m tfaccel.cli.main ...`: the same as the `tfaccel` command."""

from tfaccel.cli.main import main

main()
