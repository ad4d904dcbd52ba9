"""The speed measurement: A/B rounds between two sandboxed workers, the rules that keep them honest, when to
stop, the statistics of the interval, and the one decision of a timed status."""
