"""A run among several processes: the chief's run directory shared, a lost peer or worker named, signals while they wait."""
