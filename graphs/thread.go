package graphs

import "golang.org/x/sys/unix"

// ThreadID returns the calling OS thread's id. Thread-local capture is a property of the OS
// thread, not the goroutine, so that is what Begin records and End and Abort compare; callers
// that enforce the capture window (ep) compare against it too.
func ThreadID() int { return unix.Gettid() }

func gettid() int { return ThreadID() }
