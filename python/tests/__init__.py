"""unittest suites for the cudaep Python bindings; run with `make test-python`."""
