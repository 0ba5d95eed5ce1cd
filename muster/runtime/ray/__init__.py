"""The Ray runtime: Muster's pods as Ray actors, gangs as placement groups (docs/ray.md)."""
