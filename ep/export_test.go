package ep

// ParseEntries exposes the PTX entry parser to the black-box tests.
var ParseEntries = parseEntries

// GateOf exposes the provider's device capture gate to the black-box tests.
func GateOf(p *Provider) interface{ WaitingDrains() int } { return p.gate }
