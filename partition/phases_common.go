package partition

// phase is a step of a partition's Run, in the order a run takes them: phases_timed.go
// times them in a measurement build (go build -tags cudaep_phases), to find where a decode
// step's host time goes; the shipped library times nothing.
type phase int

const (
	phaseRead    phase = iota // take the locks, read ORT's input values
	phaseOutputs              // find the plan, have ORT allocate the outputs
	phaseDecide               // decide what runs in place and which graph replays
	phaseFenceIn              // order the run after ORT's stream
	phaseCopyIn               // copy inputs into the plan's buffers
	phaseRun                  // run the kernels or replay the graph
	phaseCopyOut              // copy outputs out of the plan's buffers
	phaseTail                 // wait or fence for ORT's stream
	phases
)

var phaseNames = [phases]string{"read inputs", "outputs", "decide", "fence in", "copy in", "run/replay", "copy out", "tail"}
