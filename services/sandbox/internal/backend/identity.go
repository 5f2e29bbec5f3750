package backend

// Identity says whose a sandbox's backend resources (a docker container, a kubernetes pod)
// are. Every such resource carries it, so that a later process of the service can tell those
// of live sandboxes from those a crashed one left behind (Reconcile of the docker and
// kubernetes backends).
type Identity struct {
	// ID and Owner are the sandbox's.
	ID, Owner string
	// Dir is the workspace root of the service instance that made the resource: a
	// Reconcile only ever touches the resources of its own dir, so several services (tests
	// run many at once) can share one engine or namespace.
	Dir string
}
