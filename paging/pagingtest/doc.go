// Package pagingtest builds the fixtures that paging's tests and the benchmark driver share:
// external-data files of layers in distinct non-zero byte patterns, and device kernels that
// hold a stream (a spin of fixed duration, and a gate that the host opens).
//
// It is test support. Only test files and the benchmarks under bench/ import it, never library
// code (internal/layers checks that); it registers its kernels with the simulated device.
package pagingtest
