package graphs

import "golang.org/x/sys/unix"

// gettid returns the calling OS thread's id. Thread-local capture is a property of the OS
// thread, not the goroutine, so that is what Begin records and End and Abort compare.
func gettid() int { return unix.Gettid() }
