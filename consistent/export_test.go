package consistent

// Step names the points between the stages of handling one input.
type Step = step

// The steps of handling an input, where WithFault injects faults.
const (
	StepLoaded    = stepLoaded    // the stream is loaded; nothing stored or sent
	StepStored    = stepStored    // the new version is stored (or the input found a duplicate)
	StepPublished = stepPublished // output index is published; the next ones are not
	StepDone      = stepDone      // every output is published; the input is about to be completed
)

// WithFault makes the Runner built from o call f at every Step; an error
// from f stops the handling there, as a crash of the host would.
func WithFault(o *Options, f func(step Step, index int) error) { o.fault = f }
