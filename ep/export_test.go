package ep

// ParseEntries exposes the PTX entry parser to the black-box tests.
var ParseEntries = parseEntries
