package backend

// Auto chooses the most isolating backend that works here: docker (when offered with
// WithDocker and it starts), else bwrap when a probe sandbox runs, else local. The reasons
// say why each better backend was not chosen, so the service can log and report them.
func Auto(opts ...Option) (Backend, []string) {
	cfg := newConfig(opts)
	var reasons []string
	if cfg.docker == nil {
		reasons = append(reasons, "docker: docker backend not built yet (none offered with WithDocker)")
	} else if b, err := cfg.docker(); err != nil {
		reasons = append(reasons, "docker: "+err.Error())
	} else {
		return b, nil
	}
	b, err := NewBwrap(opts...)
	if err == nil {
		return b, reasons
	}
	reasons = append(reasons, "bwrap: "+err.Error())
	return NewLocal(opts...), reasons
}
