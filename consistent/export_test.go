package consistent

// WithFault makes the Runner built from o call f at every Step; an error
// from f stops the handling there, as a crash of the host would.
func WithFault(o *Options, f func(step Step, index int) error) { o.fault = f }
