"""One training run, whatever the strategy: its order, opening, session, frozen context, fit,
outputs, typed summary and failures, and the cluster's tasks that run no training loop
(`runner.train` is `tfaccel.train`)."""
