"""What this machine was measured to do, stored once and measured the first time: the device ceilings (per
device fingerprint) and a problem's reference points (per problem and fingerprint). `eval`, `profile` and
`optimize` all read them here, so a verdict's roofline floor and its speedups against torch are the same
whichever command produced it. Without a database (the GPU machine has no SQLAlchemy) they are measured
now and not stored: the database is imported only where one is given."""
