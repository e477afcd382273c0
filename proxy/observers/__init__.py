"""Background observers that publish snapshots: the dynamic config follower, volume usage publisher and follower."""
