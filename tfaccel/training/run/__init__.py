"""One training run, whatever the strategy: its order, its session, its frozen context, its
outputs, its typed summary and its failures (`runner.train` is `tfaccel.train`)."""
