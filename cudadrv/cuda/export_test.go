package cuda

// Hooks for the black-box tests in package cuda_test.

// SetDriverNames replaces the names Open tries for the driver library until restore is called.
func SetDriverNames(names []string) (restore func()) {
	old := driverNames
	driverNames = names
	return func() { driverNames = old }
}

// SetSearchDirs replaces the cuBLAS/NVRTC search directories ("" is the loader path) until
// restore is called.
func SetSearchDirs(dirs []string) (restore func()) {
	old := searchDirs
	searchDirs = func() []string { return dirs }
	return func() { searchDirs = old }
}

// DefaultSearchDirs returns the search directories the package uses when not overridden.
func DefaultSearchDirs() []string { return defaultSearchDirs() }

// LoadCUBLAS runs the cuBLAS search and returns what loaded.
func LoadCUBLAS() (string, error) { _, path, err := openLibrary(cublasSpec); return path, err }

// LoadNVRTC runs the NVRTC search and returns what loaded.
func LoadNVRTC() (string, error) { _, path, err := openLibrary(nvrtcSpec); return path, err }

// LoadNamed runs the search for a library of the given sonames.
func LoadNamed(what string, sonames ...string) (string, error) {
	_, path, err := openLibrary(libSpec{what: what, sonames: sonames})
	return path, err
}

// NewBackendWithoutDriver returns a Backend whose driver table is empty: only the cuBLAS and
// NVRTC entry points (which load their own libraries) may be called on it.
func NewBackendWithoutDriver() *Backend { return &Backend{} }
